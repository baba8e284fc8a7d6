package endpoints

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller/endpointslice/podendpoint"
	"github.com/kubette/kubette/internal/controller/endpointsubsets"
	"github.com/kubette/kubette/internal/controller/podstate"
)

// errStaleCache reports that the Endpoints cache still holds a state the
// controller replaced; the Service is retried.
type errStaleCache struct{ key, resourceVersion string }

func (e errStaleCache) Error() string {
	if e.resourceVersion == "" {
		return fmt.Sprintf("endpoints cache of %s lacks an Endpoints object that exists", e.key)
	}
	return fmt.Sprintf("endpoints cache of %s is older than the controller's own write (resourceVersion %s)", e.key, e.resourceVersion)
}

// Sync brings the Endpoints of the Service of key ("namespace/name") to what
// its selected pods say, or deletes them when the Service is gone. A Service
// without a selector, or of type ExternalName, is left alone. It reads only
// the informer caches and is never called concurrently for one key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	svc, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggerTime.Delete(namespace, name)
		c.stale.forget(namespace, name)
		if _, err := c.endpointsLister.Endpoints(namespace).Get(name); apierrors.IsNotFound(err) {
			return nil
		}
		err := c.client.CoreV1().Endpoints(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Endpoints %s of a deleted Service: %w", key, err)
		}
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
	// Computed on every sync, even one that writes nothing, to keep the
	// tracker's state current.
	trigger := c.triggerTime.Compute(svc, pods)
	subsets, truncated := desiredSubsets(svc, pods)

	current, err := c.endpointsLister.Endpoints(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		current = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	case err != nil:
		return fmt.Errorf("get Endpoints %s from cache: %w", key, err)
	case c.stale.isStale(current):
		return errStaleCache{key: key, resourceVersion: current.ResourceVersion}
	}
	create := current.ResourceVersion == ""
	wantLabels := endpointsLabels(svc)
	_, overCapacity := current.Annotations[corev1.EndpointsOverCapacity]
	if !create && equality.Semantic.DeepEqual(ignoringResourceVersion(current.Subsets), subsets) &&
		equality.Semantic.DeepEqual(current.Labels, wantLabels) && overCapacity == truncated {
		return nil
	}

	next := current.DeepCopy()
	next.Subsets = subsets
	next.Labels = wantLabels
	if next.Annotations == nil {
		next.Annotations = make(map[string]string)
	}
	if trigger.IsZero() {
		delete(next.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		next.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	if truncated {
		next.Annotations[corev1.EndpointsOverCapacity] = "truncated"
	} else {
		delete(next.Annotations, corev1.EndpointsOverCapacity)
	}

	if create {
		_, err = c.client.CoreV1().Endpoints(namespace).Create(ctx, next, metav1.CreateOptions{})
		if err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // creations in a terminating namespace keep failing
			}
			if apierrors.IsAlreadyExists(err) {
				// Most likely its own creation, not yet in the cache.
				return errStaleCache{key: key}
			}
			c.recorder.Eventf(next, corev1.EventTypeWarning, "FailedToCreateEndpoint",
				"Failed to create endpoint for service %v/%v: %v", namespace, name, err)
			return fmt.Errorf("create Endpoints %s: %w", key, err)
		}
		return nil
	}
	updated, err := c.client.CoreV1().Endpoints(namespace).Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		c.recorder.Eventf(next, corev1.EventTypeWarning, "FailedToUpdateEndpoint",
			"Failed to update endpoint %v/%v: %v", namespace, name, err)
		return fmt.Errorf("update Endpoints %s: %w", key, err)
	}
	if updated.ResourceVersion != current.ResourceVersion {
		c.stale.replacedState(current)
	}
	return nil
}

// desiredSubsets lists the pods' addresses by port set, truncated at
// maxCapacity; it reports whether it truncated. Terminating pods count only
// when the Service publishes not-ready addresses (then every address is ready).
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) ([]corev1.EndpointSubset, bool) {
	b := endpointsubsets.NewBuilder()
	publish := svc.Spec.PublishNotReadyAddresses
	for _, pod := range pods {
		if !podendpoint.ShouldPodBeInEndpoints(pod, publish) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		ready := publish || podstate.IsPodReady(pod)
		if len(svc.Spec.Ports) == 0 {
			// A headless Service may have no ports.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				b.Add(addr, nil, ready)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			num, err := podendpoint.FindPort(pod, sp)
			if err != nil {
				continue
			}
			b.Add(addr, &corev1.EndpointPort{Name: sp.Name, Port: num, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}, ready)
		}
	}
	return truncate(b.Subsets())
}

// endpointsLabels are the Service's labels plus the headless marker for a
// Service without a cluster IP.
func endpointsLabels(svc *corev1.Service) map[string]string {
	lbls := maps.Clone(svc.Labels)
	if lbls == nil {
		lbls = make(map[string]string)
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		lbls[corev1.IsHeadlessService] = ""
	} else {
		delete(lbls, corev1.IsHeadlessService)
	}
	return lbls
}

// ignoringResourceVersion copies subsets without the resourceVersions of
// their target references, which say nothing about the endpoints.
func ignoringResourceVersion(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	out := make([]corev1.EndpointSubset, len(subsets))
	for i, s := range subsets {
		s = *s.DeepCopy()
		for j := range s.Addresses {
			if s.Addresses[j].TargetRef != nil {
				s.Addresses[j].TargetRef.ResourceVersion = ""
			}
		}
		for j := range s.NotReadyAddresses {
			if s.NotReadyAddresses[j].TargetRef != nil {
				s.NotReadyAddresses[j].TargetRef.ResourceVersion = ""
			}
		}
		out[i] = s
	}
	return out
}
