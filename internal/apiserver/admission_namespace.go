package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/registry"
)

// The NamespaceLifecycle admission step, as upstream's plugin of that name: objects are
// created only in namespaces that exist and are not being deleted.

var schemaCoreV1 = corev1.SchemeGroupVersion

// admitNamespace is the NamespaceLifecycle admission step: the namespace must exist and,
// except for events, must not be terminating. The watch cache answers, except for a
// namespace deleted in the last 30 s, which is read live as upstream does.
func (s *Server) admitNamespace(ctx context.Context, r *registry.Resource, ns, name string) error {
	if !r.Namespaced {
		return nil
	}
	nsRes, _ := s.table.Lookup(schemaCoreV1, "namespaces")
	obj, _, ok, err := s.cacheFor(nsRes).Get(ctx, nsRes.Key("", ns))
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if !ok || s.recentlyDeleted(ns) {
		// The cache may lag a namespace created or deleted a moment ago: ask storage.
		got, _, err := s.getFromStorage(ctx, nsRes, "", ns)
		if err != nil {
			return err
		}
		obj = got
	}
	n := obj.(*corev1.Namespace)
	if r.Kind != "Event" && (n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil) {
		e := apierrors.NewForbidden(r.GroupResource(), name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
		e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", ns), Field: "metadata.namespace"})
		return e
	}
	return nil
}

// deletedNamespaces remembers namespaces this server marked for deletion recently.
type deletedNamespaces struct {
	mu    sync.Mutex
	times map[string]time.Time
}

func (s *Server) noteNamespaceDeleted(name string) {
	s.nsDeleted.mu.Lock()
	defer s.nsDeleted.mu.Unlock()
	if s.nsDeleted.times == nil {
		s.nsDeleted.times = map[string]time.Time{}
	}
	now := time.Now()
	for n, t := range s.nsDeleted.times {
		if now.Sub(t) > 30*time.Second {
			delete(s.nsDeleted.times, n)
		}
	}
	s.nsDeleted.times[name] = now
}

func (s *Server) recentlyDeleted(name string) bool {
	s.nsDeleted.mu.Lock()
	defer s.nsDeleted.mu.Unlock()
	t, ok := s.nsDeleted.times[name]
	return ok && time.Since(t) < 30*time.Second
}

// observeDelete is the admission plugin's view of a deletion: a namespace being deleted
// is remembered, so that creates in it check storage rather than a cache that may lag.
func (s *Server) observeDelete(r *registry.Resource, name string) {
	if r.GroupVersion == schemaCoreV1 && r.Plural == "namespaces" {
		s.noteNamespaceDeleted(name)
	}
}

// admissionAttributes describes a write to the admission chain.
func (s *Server) admissionAttributes(ctx context.Context, r *registry.Resource, op admission.Operation, sub string, obj, old runtime.Object, dryRun bool) *admission.Attributes {
	a := &admission.Attributes{
		Resource: r.GroupVersion.WithResource(r.Plural), Kind: r.GroupVersion.WithKind(r.Kind), Subresource: sub,
		Operation: op, Object: obj, OldObject: old, DryRun: dryRun,
	}
	a.User, _ = filters.UserFrom(ctx)
	for _, o := range []runtime.Object{obj, old} {
		if m, err := meta.Accessor(o); o != nil && err == nil {
			a.Namespace, a.Name = m.GetNamespace(), m.GetName()
			break
		}
	}
	return a
}
