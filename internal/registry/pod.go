package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/validation"
)

// SubEphemeralContainers is the pods subresource kubectl debug adds ephemeral containers
// through (GET, PUT and PATCH, all of a whole Pod).
const SubEphemeralContainers = "ephemeralcontainers"

// podStrategy is upstream's pod strategy: a new pod starts Pending with its QoS class,
// deletions wait for the pod's grace period once it is on a node, and the
// ephemeralcontainers subresource only adds ephemeral containers.
func podStrategy() Strategy {
	return typed(Strategy{
		PrepareForCreate: preparePodForCreate,
		GracePeriod:      podGracePeriod,
		Subresources: map[string]SubresourceStrategy{
			SubEphemeralContainers: {
				PrepareForUpdate: ephemeralContainersUpdate, ValidateUpdate: validateEphemeralContainersUpdate,
				Verbs: []string{"get", "update", "patch"},
			},
		},
	})
}

func preparePodForCreate(obj runtime.Object) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: PodQOSClass(p)}
	if len(p.Spec.SchedulingGates) > 0 {
		// As upstream: a gated pod says so from the start (kubectl shows SchedulingGated).
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: metav1.Now(),
		}}
	}
}

// podGracePeriod follows upstream's CheckGracefulDelete: unscheduled or finished pods go
// at once; others wait for the request's grace period, else the pod's, else 30 s.
func podGracePeriod(obj runtime.Object, opts *metav1.DeleteOptions) int64 {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts != nil && opts.GracePeriodSeconds != nil {
		g = *opts.GracePeriodSeconds
	}
	if g < 0 {
		g = 1
	}
	return g
}

// ephemeralContainersUpdate is what an update through pods/ephemeralcontainers writes, as
// upstream's strategy: the current pod with the request's spec.ephemeralContainers, and of
// the request's metadata only what a status update may change (the annotations; labels,
// finalizers and owners stay). Anything else the request changes is dropped, not refused.
func ephemeralContainersUpdate(obj, old runtime.Object) runtime.Object {
	np, ok := obj.(*corev1.Pod)
	cp, ok2 := old.(*corev1.Pod)
	if !ok || !ok2 {
		return obj
	}
	out := cp.DeepCopy()
	out.Spec.EphemeralContainers = np.Spec.EphemeralContainers
	out.Annotations = np.Annotations
	out.ResourceVersion = np.ResourceVersion
	out.ManagedFields = np.ManagedFields
	return out
}

// validateEphemeralContainersUpdate validates an update through pods/ephemeralcontainers:
// ephemeral containers may only be added, by the spec's rules.
func validateEphemeralContainersUpdate(obj, old runtime.Object) field.ErrorList {
	np, ok := obj.(*corev1.Pod)
	cp, ok2 := old.(*corev1.Pod)
	if !ok || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("ephemeralcontainers is a subresource of pods, not of %T", obj))}
	}
	return validation.ValidateEphemeralContainersUpdate(np, cp)
}

// PodQOSClass computes a pod's QoS class as upstream does for cpu and memory.
func PodQOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[name]; ok && !q.IsZero() {
				cur := requests[name]
				cur.Add(q)
				requests[name] = cur
			}
			if q, ok := c.Resources.Limits[name]; ok && !q.IsZero() {
				cur := limits[name]
				cur.Add(q)
				limits[name] = cur
			} else {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(limits) == 2 {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
