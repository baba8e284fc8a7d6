package trace

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// runtimeCall draws a runtime's Event as the step of the node's kubelet calling the
// runtime: an arrow kubelet/<node> → runtime/<node> labelled with the CRI call, the pod
// and what the runtime did ("RunPodSandbox web-1: CNI kubette: bridge+host-local → eth0
// 10.244.0.7/24 gw 10.244.0.1 in 38ms"), in the kubelet's phase. The same call on sibling pods folds, its
// differing parts merged (mergeLabels).
func runtimeCall(e Event, node string, t time.Time, noun string, famNames *strings.Replacer) Step {
	call := e.Action
	if call == "" {
		call = e.Reason
	}
	label := call + " " + e.Object.Name + ": " + e.Message
	kubelet := "kubelet/" + node
	st := Step{Kind: StepCall, From: kubelet, To: e.Component, Label: label, Time: t, owner: kubelet, Noun: noun, obj: e.Object}
	st.foldKey = fmt.Sprintf("call|%s|%s|%s|%s", e.Component, e.Action, e.Reason, digits.ReplaceAllString(famNames.Replace(e.Message), "0"))
	return st
}

// digits are what differ between one runtime step's messages on sibling pods: addresses,
// pids, durations.
var digits = regexp.MustCompile(`[0-9]+`)

// mergeLabels merges the labels of two folded calls word by word: equal words stay,
// durations become their range (31–52ms), and other differing words keep what they share
// at either end, the middle replaced by "…" (10.244.0.…/24; a shared end never stops
// inside a number).
func mergeLabels(a, b string) string {
	wa, wb := strings.Fields(a), strings.Fields(b)
	if len(wa) != len(wb) {
		return a
	}
	for i := range wa {
		if wa[i] != wb[i] {
			wa[i] = mergeWord(wa[i], wb[i])
		}
	}
	return strings.Join(wa, " ")
}

func mergeWord(a, b string) string {
	if lo, hi, ok := durationRange(a, b); ok {
		if lo == hi {
			return lo.String()
		}
		return lo.String() + "–" + hi.String()
	}
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	for p > 0 && isDigit(a[p-1]) {
		p--
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	for s > 0 && isDigit(a[len(a)-s]) {
		s--
	}
	return a[:p] + "…" + a[len(a)-s:]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// durationRange reads two words that are durations or ranges of them (38ms, 31–52ms) and
// returns the range covering both.
func durationRange(a, b string) (lo, hi time.Duration, ok bool) {
	alo, ahi, ok1 := parseRange(a)
	blo, bhi, ok2 := parseRange(b)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return min(alo, blo), max(ahi, bhi), true
}

func parseRange(w string) (lo, hi time.Duration, ok bool) {
	l, h, isRange := strings.Cut(w, "–")
	lo, err := time.ParseDuration(l)
	if err != nil {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	if hi, err = time.ParseDuration(h); err != nil {
		return 0, 0, false
	}
	return lo, hi, true
}
