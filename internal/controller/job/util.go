package job

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

func labelsEverything() labels.Selector { return labels.Everything() }

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }

func jsonMarshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode patch: %w", err)
	}
	return b, nil
}

// finished reports whether the Job has its terminal condition.
func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// IsFinished reports whether the Job is Complete or Failed, and when it became so.
func IsFinished(job *batchv1.Job) (bool, time.Time) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// findCondition returns the condition of type t with status True, or nil.
func findCondition(s *batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t && s.Conditions[i].Status == corev1.ConditionTrue {
			return &s.Conditions[i]
		}
	}
	return nil
}

func setCondition(s *batchv1.JobStatus, t batchv1.JobConditionType, reason, msg string, now time.Time) {
	setConditionStatus(s, t, corev1.ConditionTrue, reason, msg, now)
}

// setConditionStatus sets a condition, keeping its transition time when its status
// does not change, and appending it when the Job has none of its type.
func setConditionStatus(s *batchv1.JobStatus, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) {
	ts := metav1.NewTime(now)
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return
		}
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = status, reason, msg, ts
		return
	}
	s.Conditions = append(s.Conditions, batchv1.JobCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastProbeTime: ts, LastTransitionTime: ts,
	})
}

func isIndexed(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func completions(job *batchv1.Job) int32 {
	if job.Spec.Completions == nil {
		return 0
	}
	return *job.Spec.Completions
}

// podIndex is the pod's completion index, if valid for n completions.
func podIndex(p *corev1.Pod, n int32) (int, bool) {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		v, ok = p.Labels[batchv1.JobCompletionIndexAnnotation]
	}
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= int(n) {
		return 0, false
	}
	return i, true
}

// indexFailureCount is how many pods of the pod's index failed before it.
func indexFailureCount(p *corev1.Pod) int32 {
	n, err := strconv.Atoi(p.Annotations[podIndexFailureCountAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// parseIndexes reads an index set such as "1,3-5", keeping indexes below n.
func parseIndexes(s string, n int32) sets.Set[int] {
	out := sets.New[int]()
	if s == "" {
		return out
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b && i < int(n); i++ {
			if i >= 0 {
				out.Insert(i)
			}
		}
	}
	return out
}

// formatIndexes writes an index set as upstream: ordered, runs of three or more as
// first-last ("1,3-5,7").
func formatIndexes(s sets.Set[int]) string {
	idx := s.UnsortedList()
	sort.Ints(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		switch {
		case j-i >= 2:
			parts = append(parts, strconv.Itoa(idx[i])+"-"+strconv.Itoa(idx[j]))
		case j-i == 1:
			parts = append(parts, strconv.Itoa(idx[i]), strconv.Itoa(idx[j]))
		default:
			parts = append(parts, strconv.Itoa(idx[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// matchPodFailurePolicy returns the action of the first rule of the Job's pod
// failure policy that the failed pod matches ("" when none does), with upstream's
// message for a FailJob rule.
func matchPodFailurePolicy(job *batchv1.Job, p *corev1.Pod) (batchv1.PodFailurePolicyAction, string) {
	if job.Spec.PodFailurePolicy == nil {
		return "", ""
	}
	for i, rule := range job.Spec.PodFailurePolicy.Rules {
		if r := rule.OnExitCodes; r != nil {
			if name, code, ok := matchExitCodes(r, p); ok {
				return rule.Action, fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d",
					name, p.Namespace, p.Name, code, rule.Action, i)
			}
			continue
		}
		for _, pat := range rule.OnPodConditions {
			for _, c := range p.Status.Conditions {
				if c.Type == pat.Type && c.Status == pat.Status {
					return rule.Action, fmt.Sprintf("Pod %s/%s has condition %s matching %s rule at index %d",
						p.Namespace, p.Name, pat.Type, rule.Action, i)
				}
			}
		}
	}
	return "", ""
}

// matchExitCodes finds a container that ended with a non-zero exit code the
// requirement matches.
func matchExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, p *corev1.Pod) (string, int32, bool) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, s := range list {
			if r.ContainerName != nil && *r.ContainerName != s.Name {
				continue
			}
			t := s.State.Terminated
			if t == nil || t.ExitCode == 0 {
				continue
			}
			in := false
			for _, v := range r.Values {
				if v == t.ExitCode {
					in = true
					break
				}
			}
			if (r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
				return s.Name, t.ExitCode, true
			}
		}
	}
	return "", 0, false
}
