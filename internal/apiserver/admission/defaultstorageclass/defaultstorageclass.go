// Package defaultstorageclass is the DefaultStorageClass admission plugin, as
// upstream's plugin/pkg/admission/storage/storageclass/setdefault: a new
// PersistentVolumeClaim that names no StorageClass (neither spec.storageClassName nor
// the beta annotation) gets the cluster's default class, the one annotated
// storageclass.kubernetes.io/is-default-class=true (or its beta form); when several
// are, the newest, then the first by name. Without a default the claim is left
// alone.
package defaultstorageclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// Name is the plugin's name, as upstream's.
const Name = "DefaultStorageClass"

// The annotations that mark the default class, GA and beta.
const (
	IsDefaultAnnotation     = "storageclass.kubernetes.io/is-default-class"
	BetaIsDefaultAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

var (
	claims         = schema.GroupResource{Resource: "persistentvolumeclaims"}
	storageClasses = schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}
)

// Lister lists the cluster's current objects (the API server's watch caches).
type Lister interface {
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Plugin gives new claims the default StorageClass.
type Plugin struct {
	list Lister
}

var _ admission.Mutator = (*Plugin)(nil)

// New returns the plugin reading StorageClasses through l.
func New(l Lister) *Plugin { return &Plugin{list: l} }

// Admit sets the default class on a new claim that names none.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Subresource != "" || a.Resource.GroupResource() != claims {
		return nil
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Spec.StorageClassName != nil || pvc.Annotations[corev1.BetaStorageClassAnnotation] != "" {
		return nil
	}
	objs, err := p.list.List(ctx, storageClasses, "")
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up the default storage class: %w", err))
	}
	if def := Default(objs); def != nil {
		name := def.Name
		pvc.Spec.StorageClassName = &name
	}
	return nil
}

// IsDefault reports whether sc is marked as a default class.
func IsDefault(sc *storagev1.StorageClass) bool {
	return sc.Annotations[IsDefaultAnnotation] == "true" || sc.Annotations[BetaIsDefaultAnnotation] == "true"
}

// Default returns the default class among objs (the newest marked one; by name
// among the equally new), or nil.
func Default(objs []runtime.Object) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, o := range objs {
		sc, ok := o.(*storagev1.StorageClass)
		if !ok || !IsDefault(sc) {
			continue
		}
		switch {
		case best == nil, sc.CreationTimestamp.After(best.CreationTimestamp.Time),
			sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name:
			best = sc
		}
	}
	return best
}
