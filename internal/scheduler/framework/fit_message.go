package framework

import (
	"fmt"
	"sort"
	"strings"
)

// FitMessage is upstream's summary of why a pod fits no node:
// "0/N nodes are available: <count> <reason>, ...." with the reasons counted
// over the nodes in m, plus absent's reasons for each of the numAllNodes not in
// m (absent may be nil), sorted as strings. Both the scheduler's FitError and
// preemption's message use it.
func FitMessage(numAllNodes int, m NodeToStatus, absent *Status) string {
	msg := fmt.Sprintf("0/%d nodes are available:", numAllNodes)
	counts := map[string]int{}
	for _, s := range m {
		for _, r := range s.Reasons() {
			counts[r]++
		}
	}
	if n := numAllNodes - len(m); n > 0 && absent != nil {
		for _, r := range absent.Reasons() {
			counts[r] += n
		}
	}
	reasons := make([]string, 0, len(counts))
	for r, n := range counts {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		msg += " " + strings.Join(reasons, ", ") + "."
	}
	return msg
}
