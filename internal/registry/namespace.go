package registry

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// immortalNamespace reports whether a namespace may never be deleted, as upstream's
// NamespaceLifecycle admission says.
func immortalNamespace(name string) bool {
	switch name {
	case metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic:
		return true
	}
	return false
}

// namespaceStrategy is upstream's namespace strategy: a namespace is created with its
// status (phase Active from defaulting), a deletion makes it Terminating until the
// namespace controller empties it and clears spec.finalizers through /finalize, and the
// system namespaces may not be deleted.
func namespaceStrategy() Strategy {
	return typed(Strategy{
		PrepareForCreate: keepStatus,
		CheckDelete:      checkNamespaceDelete,
		PrepareForDelete: func(obj runtime.Object) bool {
			n, ok := obj.(*corev1.Namespace)
			if !ok || len(n.Spec.Finalizers) == 0 {
				return false
			}
			n.Status.Phase = corev1.NamespaceTerminating
			return true
		},
		Finalizing: func(obj runtime.Object) bool {
			n, ok := obj.(*corev1.Namespace)
			return ok && len(n.Spec.Finalizers) > 0
		},
		// As upstream's FinalizeREST: PUT only.
		Subresources: map[string]SubresourceStrategy{"finalize": {PrepareForUpdate: finalizeNamespace, Verbs: []string{"update"}}},
	})
}

func checkNamespaceDelete(obj runtime.Object) error {
	n, ok := obj.(*corev1.Namespace)
	if ok && immortalNamespace(n.Name) {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, n.Name, errors.New("this namespace may not be deleted"))
	}
	return nil
}

// finalizeNamespace is what an update through namespaces/finalize writes: the current
// namespace with the request's spec.finalizers, nothing else.
func finalizeNamespace(obj, old runtime.Object) runtime.Object {
	cur, ok := old.(*corev1.Namespace)
	if !ok {
		return obj
	}
	out := cur.DeepCopy()
	if n, ok := obj.(*corev1.Namespace); ok {
		out.Spec.Finalizers = n.Spec.Finalizers
		out.ResourceVersion = n.ResourceVersion
	}
	return out
}
