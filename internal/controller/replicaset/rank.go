package replicaset

import (
	"math"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller/podstate"
)

// podsToDelete returns the diff pods of pods that should go first. It sorts
// its own copy of the slice.
func podsToDelete(pods, related []*corev1.Pod, diff int, now metav1.Time) []*corev1.Pod {
	pods = clonePodSlice(pods)
	// Deleting them all needs no ranking.
	if diff < len(pods) {
		sort.Sort(rankPodsOnSameNode(pods, related, now))
	}
	return pods[:min(diff, len(pods))]
}

// rankPodsOnSameNode ranks each pod by the number of active related pods on
// its node (related normally includes pods).
func rankPodsOnSameNode(pods, related []*corev1.Pod, now metav1.Time) activePodsWithRanks {
	onNode := make(map[string]int)
	for _, p := range related {
		if podstate.IsPodActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranks := make([]int, len(pods))
	for i, p := range pods {
		ranks[i] = onNode[p.Spec.NodeName]
	}
	return activePodsWithRanks{pods: pods, rank: ranks, now: now}
}

// podPhaseOrdinal orders phases for deletion: the earlier in start-up, the sooner deleted.
var podPhaseOrdinal = map[corev1.PodPhase]int{
	corev1.PodPending: 0,
	corev1.PodUnknown: 1,
	corev1.PodRunning: 2,
}

// activePodsWithRanks sorts pods so that those to delete first come first,
// as upstream's controller.ActivePodsWithRanks with the PodDeletionCost and
// LogarithmicScaleDown features on (both GA upstream).
type activePodsWithRanks struct {
	pods []*corev1.Pod
	// rank[i] is the number of related pods on pods[i]'s node: a pod on a
	// crowded node goes first.
	rank []int
	now  metav1.Time
}

func (s activePodsWithRanks) Len() int { return len(s.pods) }

func (s activePodsWithRanks) Swap(i, j int) {
	s.pods[i], s.pods[j] = s.pods[j], s.pods[i]
	s.rank[i], s.rank[j] = s.rank[j], s.rank[i]
}

// Less reports whether pod i should be deleted before pod j.
func (s activePodsWithRanks) Less(i, j int) bool {
	pi, pj := s.pods[i], s.pods[j]
	// 1. Unassigned < assigned.
	if pi.Spec.NodeName != pj.Spec.NodeName && (pi.Spec.NodeName == "" || pj.Spec.NodeName == "") {
		return pi.Spec.NodeName == ""
	}
	// 2. Pending < Unknown < Running.
	if oi, oj := podPhaseOrdinal[pi.Status.Phase], podPhaseOrdinal[pj.Status.Phase]; oi != oj {
		return oi < oj
	}
	// 3. Not ready < ready.
	if ri, rj := podstate.IsPodReady(pi), podstate.IsPodReady(pj); ri != rj {
		return !ri
	}
	// 4. Lower pod-deletion-cost < higher.
	if ci, cj := deletionCost(pi), deletionCost(pj); ci != cj {
		return ci < cj
	}
	// 5. Doubled up < not doubled up.
	if s.rank[i] != s.rank[j] {
		return s.rank[i] > s.rank[j]
	}
	// 6. Ready for less time < more time (on a logarithmic scale).
	if podstate.IsPodReady(pi) && podstate.IsPodReady(pj) {
		ti, tj := readyTime(pi), readyTime(pj)
		if !ti.Equal(&tj) {
			return s.newerFirst(ti, tj, pi, pj)
		}
	}
	// 7. More container restarts < fewer.
	if res, ok := compareMaxRestarts(pi, pj); ok {
		return res
	}
	// 8. Empty creation time < newer < older (on a logarithmic scale).
	if !pi.CreationTimestamp.Equal(&pj.CreationTimestamp) {
		return s.newerFirst(pi.CreationTimestamp, pj.CreationTimestamp, pi, pj)
	}
	return false
}

// newerFirst orders ti before tj when ti is newer (a zero time first). Times
// whose ages fall in the same power-of-two bucket are treated as equal and
// ordered by UID, so that scale-down spreads over pods of similar age.
func (s activePodsWithRanks) newerFirst(ti, tj metav1.Time, pi, pj *corev1.Pod) bool {
	if s.now.IsZero() || ti.IsZero() || tj.IsZero() {
		return afterOrZero(ti, tj)
	}
	if d := logarithmicRankDiff(ti, tj, s.now); d != 0 {
		return d < 0
	}
	return pi.UID < pj.UID
}

// afterOrZero reports whether t1 is after t2, a zero time counting as the latest.
func afterOrZero(t1, t2 metav1.Time) bool {
	if t1.IsZero() || t2.IsZero() {
		return t1.IsZero()
	}
	return t1.After(t2.Time)
}

// logarithmicRankDiff compares the base-2 logarithms of the ages of t1 and t2 at now.
func logarithmicRankDiff(t1, t2, now metav1.Time) int64 {
	rank := func(t metav1.Time) int64 {
		if d := now.Sub(t.Time); d > 0 {
			return int64(math.Log2(float64(d)))
		}
		return -1
	}
	return rank(t1) - rank(t2)
}

// readyTime is when the pod last became ready (zero when not ready).
func readyTime(pod *corev1.Pod) metav1.Time {
	if c := podstate.ReadyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime
	}
	return metav1.Time{}
}

// deletionCost is the pod's controller.kubernetes.io/pod-deletion-cost
// annotation, 0 when absent or not an int32.
func deletionCost(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[corev1.PodDeletionCost]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// maxRestarts returns the highest restart count among the pod's regular
// containers and among its sidecars (restartable init containers).
func maxRestarts(pod *corev1.Pod) (regular, sidecar int32) {
	for _, cs := range pod.Status.ContainerStatuses {
		regular = max(regular, cs.RestartCount)
	}
	sidecars := make(map[string]bool)
	for _, ic := range pod.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[ic.Name] = true
		}
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if sidecars[cs.Name] {
			sidecar = max(sidecar, cs.RestartCount)
		}
	}
	return regular, sidecar
}

// compareMaxRestarts reports whether pi restarted more than pj (regular
// containers first, then sidecars); ok is false when they are equal.
func compareMaxRestarts(pi, pj *corev1.Pod) (more, ok bool) {
	ri, si := maxRestarts(pi)
	rj, sj := maxRestarts(pj)
	if ri != rj {
		return ri > rj, true
	}
	if si != sj {
		return si > sj, true
	}
	return false, false
}
