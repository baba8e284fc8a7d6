// Package priority is the Priority admission plugin, as upstream's
// plugin/pkg/admission/priority: a new pod's spec.priorityClassName is resolved to
// spec.priority and spec.preemptionPolicy (the global default class, else priority 0,
// when it names none; a 403 when the class does not exist), and at most one
// PriorityClass may be the global default.
package priority

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// Name is the plugin's name, as upstream's.
const Name = "Priority"

// defaultPriority is a pod's priority when no class is the global default.
const defaultPriority = int32(0)

var (
	pods            = schema.GroupResource{Resource: "pods"}
	priorityClasses = schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}
)

// Reader reads the cluster's current objects (the API server's watch caches).
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Plugin sets pods' priorities and keeps the global default class unique.
type Plugin struct {
	read Reader
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// New returns the plugin reading PriorityClasses through r.
func New(r Reader) *Plugin { return &Plugin{read: r} }

// Admit sets the priority of a pod being created, and keeps it on an update that
// leaves it out.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Subresource != "" || a.Resource.GroupResource() != pods {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	switch a.Operation {
	case admission.Update:
		if old, ok := a.OldObject.(*corev1.Pod); ok {
			if pod.Spec.Priority == nil {
				pod.Spec.Priority = old.Spec.Priority
			}
			if pod.Spec.PreemptionPolicy == nil {
				pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
			}
		}
		return nil
	case admission.Create:
		return p.admitNewPod(ctx, a, pod)
	}
	return nil
}

func (p *Plugin) admitNewPod(ctx context.Context, a *admission.Attributes, pod *corev1.Pod) error {
	var priority int32
	var policy *corev1.PreemptionPolicy
	if pod.Spec.PriorityClassName == "" {
		def, err := p.globalDefault(ctx)
		if err != nil {
			return fmt.Errorf("failed to get default priority class: %w", err)
		}
		if def != nil {
			pod.Spec.PriorityClassName, priority, policy = def.Name, def.Value, def.PreemptionPolicy
		} else {
			preempt := corev1.PreemptLowerPriority
			priority, policy = defaultPriority, &preempt
		}
	} else {
		obj, err := p.read.Get(ctx, priorityClasses, "", pod.Spec.PriorityClassName)
		if apierrors.IsNotFound(err) {
			return admission.NewForbidden(a, fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		}
		if err != nil {
			return fmt.Errorf("failed to get PriorityClass with name %s: %w", pod.Spec.PriorityClassName, err)
		}
		pc, ok := obj.(*schedulingv1.PriorityClass)
		if !ok {
			return fmt.Errorf("PriorityClass %s is a %T", pod.Spec.PriorityClassName, obj)
		}
		priority, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return admission.NewForbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return admission.NewForbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
		}
		pol := *policy
		pod.Spec.PreemptionPolicy = &pol
	}
	return nil
}

// Validate refuses a second global default PriorityClass.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Subresource != "" || a.Resource.GroupResource() != priorityClasses {
		return nil
	}
	if a.Operation != admission.Create && a.Operation != admission.Update {
		return nil
	}
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok || !pc.GlobalDefault {
		return nil
	}
	def, err := p.globalDefault(ctx)
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %w", err)
	}
	if def != nil && (a.Operation == admission.Create || def.Name != pc.Name) {
		return admission.NewForbidden(a, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}

// globalDefault returns the global default class, the lowest if there are several
// (created concurrently); nil if none.
func (p *Plugin) globalDefault(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	objs, err := p.read.List(ctx, priorityClasses, "")
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for _, o := range objs {
		pc, ok := o.(*schedulingv1.PriorityClass)
		if ok && pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def, nil
}
