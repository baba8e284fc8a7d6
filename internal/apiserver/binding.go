package apiserver

import (
	"fmt"
	"maps"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry"
)

// The pods/binding subresource, as upstream's BindingREST: the scheduler's way of
// assigning a pod to a node.

// handleBinding serves POST pods/binding: it assigns the pod to the target node once.
func (s *Server) handleBinding(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	data, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	o := parseWriteOptions(req)
	b := &corev1.Binding{}
	if _, err := s.decodeInto(data, bodyMediaType(req), corev1.SchemeGroupVersion.WithKind("Binding"), b, o.validation); err != nil {
		s.writeError(w, req, err)
		return
	}
	name := ri.name
	if name == "" {
		name = b.Name
	}
	if b.Target.Name == "" {
		s.writeError(w, req, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")}))
		return
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		s.writeError(w, req, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name, field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})}))
		return
	}
	_, _, err = s.update(req.Context(), ri.res, ri.namespace, name, func(cur runtime.Object) (runtime.Object, error) {
		return bindPod(cur.(*corev1.Pod), b, ri.res, name, metav1.NewTime(s.cfg.Now().Truncate(1e9)))
	}, updateOptions{writeOptions: o, subresource: "binding"})
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	s.writeConst(w, req, http.StatusCreated, s.bindingCreated)
}

// bindingCreatedStatus is the response to a successful binding, as upstream's.
func bindingCreatedStatus() *metav1.Status {
	st := &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
	st.APIVersion, st.Kind = "v1", "Status"
	return st
}

// bindPod returns cur assigned to the binding's node, as upstream's BindingREST: cur is
// the stored state, shared with the watch cache, and stays as it is. The new pod shares
// everything with cur but what the binding changes — the node name, the annotations and
// the conditions — which are its own.
func bindPod(cur *corev1.Pod, b *corev1.Binding, r *registry.Resource, name string, now metav1.Time) (*corev1.Pod, error) {
	if cur.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
	}
	if b.UID != "" && b.UID != cur.UID {
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, cur.UID))
	}
	if cur.Spec.NodeName != "" {
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("pod %s is already assigned to node %q", name, cur.Spec.NodeName))
	}
	if len(cur.Spec.SchedulingGates) != 0 {
		// A pod not ready for scheduling cannot be bound, as upstream.
		return nil, apierrors.NewConflict(r.GroupResource(), name, fmt.Errorf("pod %s has non-empty .spec.schedulingGates", name))
	}
	pod := *cur
	pod.Spec.NodeName = b.Target.Name
	if len(b.Annotations) > 0 {
		pod.Annotations = make(map[string]string, len(cur.Annotations)+len(b.Annotations))
		maps.Copy(pod.Annotations, cur.Annotations)
		maps.Copy(pod.Annotations, b.Annotations)
	}
	pod.Status.Conditions = slices.Clone(cur.Status.Conditions)
	setPodCondition(&pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
	return &pod, nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
