package endpointslice

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// errStaleCache reports that the slice cache has not caught up with the
// controller's own writes; the Service is retried.
type errStaleCache struct{ service string }

func (e errStaleCache) Error() string {
	return fmt.Sprintf("EndpointSlice cache of Service %s is older than the controller's own writes", e.service)
}

// Sync brings the EndpointSlices of the Service of key ("namespace/name") to
// what its selected pods say. A deleted Service's slices are left to the
// garbage collector (they carry its owner reference); a Service without a
// selector, or of type ExternalName, is left alone. It reads only the
// informer caches and is never called concurrently for one key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	svc, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggerTime.Delete(namespace, name)
		c.tracker.DeleteService(namespace, name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Service %s from cache: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil
	}
	pods, err := c.podLister.Pods(namespace).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return fmt.Errorf("list pods of Service %s: %w", key, err)
	}
	cached, err := c.sliceLister.EndpointSlices(namespace).List(managedSelector(name))
	if err != nil {
		return fmt.Errorf("list EndpointSlices of Service %s: %w", key, err)
	}
	var slices []*discoveryv1.EndpointSlice
	for _, s := range cached {
		if s.DeletionTimestamp == nil {
			slices = append(slices, s)
		}
	}
	if c.tracker.Stale(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, slices) {
		return errStaleCache{service: key}
	}
	// Computed on every sync, even one that writes nothing, to keep the
	// tracker's state current.
	trigger := c.triggerTime.Compute(svc, pods)
	p, planErr := c.planService(svc, pods, slices, c.nodeLister.Get)
	if err := errors.Join(c.apply(ctx, svc, p, trigger), planErr); err != nil {
		if c.recorder != nil {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices",
				"Error updating Endpoint Slices for Service %s: %v", key, err)
		}
		return err
	}
	return nil
}

// managedSelector selects the slices this controller manages for the Service name.
func managedSelector(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	})
}
