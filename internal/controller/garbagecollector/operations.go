package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"
)

// errNamespacedOwnerOfClusterScoped marks a cluster-scoped object that names a namespaced
// owner: an invalid reference that no retry can resolve.
var errNamespacedOwnerOfClusterScoped = errors.New("cluster-scoped objects cannot refer to namespaced owners")

// mappingError is a reference to an apiVersion/kind the REST mapper does not know (yet).
type mappingError struct {
	apiVersion, kind string
	err              error
}

func (e *mappingError) Error() string {
	return fmt.Sprintf("unable to map %s %s to a resource: %v", e.apiVersion, e.kind, e.err)
}

func (e *mappingError) Unwrap() error { return e.err }

// resource maps an apiVersion and kind to the resource serving it and whether it is namespaced.
func (c *Controller) resource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, &mappingError{apiVersion: apiVersion, kind: kind, err: err}
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// client returns the metadata client for the object id, with the namespace cleared for
// cluster-scoped kinds.
func (c *Controller) client(id objectReference) (metadata.ResourceInterface, error) {
	gvr, namespaced, err := c.resource(id.APIVersion, id.Kind)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		return c.metadata.Resource(gvr), nil
	}
	if id.Namespace == "" {
		return nil, errNamespacedOwnerOfClusterScoped
	}
	return c.metadata.Resource(gvr).Namespace(id.Namespace), nil
}

// getObject reads the live metadata of id (by name; the caller compares UIDs).
func (c *Controller) getObject(ctx context.Context, id objectReference) (*metav1.PartialObjectMetadata, error) {
	rc, err := c.client(id)
	if err != nil {
		return nil, err
	}
	obj, err := rc.Get(ctx, id.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	return obj, nil
}

// deleteObject deletes id with a UID precondition, and a resourceVersion precondition when
// rv is set so that a change of the owner references since the decision aborts it. On a
// conflict where only the resourceVersion moved and the references are the same it
// retries with the UID precondition alone.
func (c *Controller) deleteObject(ctx context.Context, id objectReference, rv string, refsAtRV []metav1.OwnerReference, policy metav1.DeletionPropagation) error {
	rc, err := c.client(id)
	if err != nil {
		return err
	}
	uid := id.UID
	pre := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err = rc.Delete(ctx, id.Name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &policy})
	if apierrors.IsConflict(err) && rv != "" {
		live, getErr := rc.Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			return nil
		}
		if getErr == nil && live.UID == id.UID && live.ResourceVersion != rv &&
			reflect.DeepEqual(live.OwnerReferences, refsAtRV) {
			return c.deleteObject(ctx, id, "", nil, policy)
		}
	}
	if err != nil {
		return fmt.Errorf("delete %s (propagation %s): %w", id, policy, err)
	}
	return nil
}

// patchObject applies a patch to id.
func (c *Controller) patchObject(ctx context.Context, id objectReference, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error) {
	rc, err := c.client(id)
	if err != nil {
		return nil, err
	}
	obj, err := rc.Patch(ctx, id.Name, pt, data, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", id, err)
	}
	return obj, nil
}

// patch applies a strategic merge patch, falling back to the JSON merge patch built by
// fallback from the live object when the resource does not support strategic merge (415).
func (c *Controller) patch(ctx context.Context, id objectReference, smp []byte, fallback func(metav1.Object) ([]byte, error)) (*metav1.PartialObjectMetadata, error) {
	obj, err := c.patchObject(ctx, id, types.StrategicMergePatchType, smp)
	if err == nil || !apierrors.IsUnsupportedMediaType(err) {
		return obj, err
	}
	live, err := c.getObject(ctx, id)
	if err != nil {
		return nil, err
	}
	if live.UID != id.UID {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, id.Name)
	}
	data, err := fallback(live)
	if err != nil {
		return nil, fmt.Errorf("build merge patch for %s: %w", id, err)
	}
	return c.patchObject(ctx, id, types.MergePatchType, data)
}

// removeFinalizer removes finalizer f from id, retrying on conflicts; a missing object or
// finalizer is success. Removing the last finalizer of an object being deleted lets the
// server delete it.
func (c *Controller) removeFinalizer(ctx context.Context, id objectReference, f string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		live, err := c.getObject(ctx, id)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if live.UID != id.UID || !hasFinalizer(live, f) {
			return nil
		}
		data, err := removeFinalizerPatch(live.ResourceVersion, live.Finalizers, f)
		if err != nil {
			return fmt.Errorf("build finalizer patch: %w", err)
		}
		_, err = c.patchObject(ctx, id, types.MergePatchType, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove finalizer %s from %s: %w", f, id, err)
	}
	return nil
}
