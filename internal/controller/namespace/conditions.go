package namespace

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// conditionTypes are the namespace status conditions the deleter maintains, in the
// order they are added to a namespace (upstream's order).
func conditionTypes() []corev1.NamespaceConditionType {
	return []corev1.NamespaceConditionType{
		corev1.NamespaceDeletionDiscoveryFailure,
		corev1.NamespaceDeletionGVParsingFailure,
		corev1.NamespaceDeletionContentFailure,
		corev1.NamespaceContentRemaining,
		corev1.NamespaceFinalizersRemaining,
	}
}

// okCondition is the "nothing wrong" (status False) variant of a condition, with
// upstream's reasons and messages.
func okCondition(t corev1.NamespaceConditionType, now metav1.Time) corev1.NamespaceCondition {
	c := corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: now}
	switch t {
	case corev1.NamespaceDeletionDiscoveryFailure:
		c.Reason, c.Message = "ResourcesDiscovered", "All resources successfully discovered"
	case corev1.NamespaceDeletionGVParsingFailure:
		c.Reason, c.Message = "ParsedGroupVersions", "All legacy kube types successfully parsed"
	case corev1.NamespaceDeletionContentFailure:
		c.Reason, c.Message = "ContentDeleted", "All content successfully deleted, may be waiting on finalization"
	case corev1.NamespaceContentRemaining, corev1.NamespaceFinalizersRemaining:
		c.Reason, c.Message = "ContentRemoved", "All content successfully removed"
	}
	return c
}

// conditionUpdater collects what went wrong in a deletion pass and turns it into
// namespace status conditions.
type conditionUpdater struct {
	now           metav1.Time
	failures      []corev1.NamespaceCondition
	contentErrors []string
}

func (u *conditionUpdater) fail(t corev1.NamespaceConditionType, reason, message string) {
	u.failures = append(u.failures, corev1.NamespaceCondition{
		Type: t, Status: corev1.ConditionTrue, LastTransitionTime: u.now, Reason: reason, Message: message,
	})
}

// discoveryFailed records a failed discovery.
func (u *conditionUpdater) discoveryFailed(err error) {
	msg := err.Error()
	var groupErr *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &groupErr) {
		msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(groupErr.Groups), groupErr)
	}
	u.fail(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
}

// groupVersionFailed records a group version that could not be parsed.
func (u *conditionUpdater) groupVersionFailed(err error) {
	u.fail(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", err.Error())
}

// contentFailed records a resource whose content could not be deleted.
func (u *conditionUpdater) contentFailed(err error) {
	u.contentErrors = append(u.contentErrors, err.Error())
}

// contentRemaining records what is left in the namespace.
func (u *conditionUpdater) contentRemaining(t remainingTotals) {
	if len(t.byResource) > 0 {
		var parts []string
		for gvr, n := range t.byResource {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		slices.Sort(parts)
		u.fail(corev1.NamespaceContentRemaining, "SomeResourcesRemain",
			"Some resources are remaining: "+strings.Join(parts, ", "))
	}
	if len(t.byFinalizer) > 0 {
		var parts []string
		for f, n := range t.byFinalizer {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		slices.Sort(parts)
		u.fail(corev1.NamespaceFinalizersRemaining, "SomeFinalizerRemain",
			"Some finalizers are remaining: "+strings.Join(parts, ", "))
	}
}

// apply sets every maintained condition on status (the failure if one was recorded,
// else the ok variant) and reports whether anything changed. LastTransitionTime moves
// only when a condition's status flips.
func (u *conditionUpdater) apply(status *corev1.NamespaceStatus) bool {
	conds := slices.Clone(u.failures)
	if len(u.contentErrors) > 0 {
		msgs := slices.Sorted(slices.Values(u.contentErrors))
		conds = append(conds, corev1.NamespaceCondition{
			Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, LastTransitionTime: u.now,
			Reason:  "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")),
		})
	}
	changed := false
	for _, t := range conditionTypes() {
		want := okCondition(t, u.now)
		if i := slices.IndexFunc(conds, func(c corev1.NamespaceCondition) bool { return c.Type == t }); i >= 0 {
			want = conds[i]
		}
		i := slices.IndexFunc(status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == t })
		if i < 0 {
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		have := &status.Conditions[i]
		if have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			continue
		}
		if have.Status != want.Status {
			have.LastTransitionTime = u.now
		}
		have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	return changed
}
