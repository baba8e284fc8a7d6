// Package runtimeclass is the RuntimeClass admission plugin, as upstream's
// plugin/pkg/admission/runtimeclass: a new pod naming a RuntimeClass gets the class's
// overhead in spec.overhead and the class's scheduling constraints (its nodeSelector
// merged into the pod's, its tolerations added); a pod naming a class that does not
// exist, setting an overhead other than its class's, or an overhead without a class
// that defines one, is refused with a 403.
package runtimeclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// Name is the plugin's name, as upstream's.
const Name = "RuntimeClass"

var (
	pods           = schema.GroupResource{Resource: "pods"}
	runtimeClasses = schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}
)

// Reader reads the cluster's current objects. The API server's Get reads its watch
// cache and confirms a miss in storage, as upstream's plugin falls back from its
// informer to a live lookup.
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
}

// Plugin applies RuntimeClasses to new pods.
type Plugin struct {
	read Reader
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// New returns the plugin reading RuntimeClasses through r.
func New(r Reader) *Plugin { return &Plugin{read: r} }

// Admit sets the overhead and the scheduling constraints of the class a new pod names.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, rc, err := p.objects(ctx, a)
	if err != nil || pod == nil || rc == nil {
		return err
	}
	if rc.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if s := rc.Scheduling; s != nil {
		selector := pod.Spec.NodeSelector
		for key, want := range s.NodeSelector {
			if have, ok := selector[key]; ok && have != want {
				return admission.NewForbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", key, want, key, have))
			}
		}
		if len(s.NodeSelector) > 0 {
			if selector == nil {
				selector = make(map[string]string, len(s.NodeSelector))
			}
			for key, want := range s.NodeSelector {
				selector[key] = want
			}
			pod.Spec.NodeSelector = selector
		}
		pod.Spec.Tolerations = MergeTolerations(pod.Spec.Tolerations, s.Tolerations)
	}
	return nil
}

// Validate refuses a new pod whose overhead is not its class's: a mutating plugin after
// this one, or a pod without a class, may have set it.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, rc, err := p.objects(ctx, a)
	if err != nil || pod == nil || len(pod.Spec.Overhead) == 0 {
		return err
	}
	if rc == nil || rc.Overhead == nil {
		return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	if !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
		return admission.NewForbidden(a, fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
	}
	return nil
}

// objects returns the pod a creates and the RuntimeClass it names: nil pod for any
// other request, nil class for a pod that names none.
func (p *Plugin) objects(ctx context.Context, a *admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	if a.Operation != admission.Create || a.Subresource != "" || a.Resource.GroupResource() != pods {
		return nil, nil, nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil, nil, apierrors.NewBadRequest("Resource was marked with kind Pod but was unable to be converted")
	}
	if pod.Spec.RuntimeClassName == nil {
		return pod, nil, nil
	}
	name := *pod.Spec.RuntimeClassName
	obj, err := p.read.Get(ctx, runtimeClasses, "", name)
	if apierrors.IsNotFound(err) {
		return nil, nil, admission.NewForbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get RuntimeClass %s: %w", name, err)
	}
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return nil, nil, fmt.Errorf("RuntimeClass %s is a %T", name, obj)
	}
	return pod, rc, nil
}

// MergeTolerations returns the tolerations of first and then second, without those
// another one of the set already covers (tolerates a superset of the taints), as
// upstream's tolerations.MergeTolerations; of equal ones the first is kept.
func MergeTolerations(first, second []corev1.Toleration) []corev1.Toleration {
	all := make([]corev1.Toleration, 0, len(first)+len(second))
	all = append(append(all, first...), second...)
	var out []corev1.Toleration
	for i, t := range all {
		redundant := false
		for _, kept := range out {
			redundant = redundant || covers(kept, t)
		}
		for _, later := range all[i+1:] {
			redundant = redundant || (!apiequality.Semantic.DeepEqual(t, later) && covers(later, t))
		}
		if !redundant {
			out = append(out, t)
		}
	}
	return out
}

// covers reports whether wide tolerates every taint t tolerates.
func covers(wide, t corev1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(wide, t) {
		return true
	}
	// Only an empty key with Exists matches every key.
	if t.Key != wide.Key && (wide.Key != "" || wide.Operator != corev1.TolerationOpExists) {
		return false
	}
	// An empty effect matches every effect.
	if wide.Effect != "" && t.Effect != wide.Effect {
		return false
	}
	// A bounded NoExecute toleration covers only one that is bounded no later.
	if wide.Effect == corev1.TaintEffectNoExecute && wide.TolerationSeconds != nil &&
		(t.TolerationSeconds == nil || *t.TolerationSeconds > *wide.TolerationSeconds) {
		return false
	}
	switch wide.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return t.Operator == corev1.TolerationOpEqual && t.Value == wide.Value
	}
	return false
}
