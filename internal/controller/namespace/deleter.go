package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

const (
	// finalizerEstimateSeconds is the estimate for objects held by finalizers (upstream's).
	finalizerEstimateSeconds int64 = 15
	// overdueEstimateSeconds is the estimate for objects whose graceful deletion is past
	// its grace period but not confirmed yet (a pod whose kubelet has not reported).
	// Upstream counts these as an unexpected error and retries with backoff.
	overdueEstimateSeconds int64 = 10
)

// deletableResource is one namespaced resource found by discovery.
type deletableResource struct {
	gvr   schema.GroupVersionResource
	verbs []string
}

func (r deletableResource) supports(verb string) bool { return slices.Contains(r.verbs, verb) }

// resourceResult is what deleting one resource left behind.
type resourceResult struct {
	// estimate is how many seconds the remaining items should take (0: none, or unknown).
	estimate int64
	// remaining is how many items are left.
	remaining int
	// byFinalizer counts the remaining items per finalizer.
	byFinalizer map[string]int
}

// remainingTotals sums what is left in a namespace after a deletion pass.
type remainingTotals struct {
	byResource  map[schema.GroupVersionResource]int
	byFinalizer map[string]int
}

// deleteAllContent deletes every deletable namespaced resource in ns, records the outcome
// in the namespace's status conditions, and returns the (possibly updated) namespace and
// an estimate in seconds of how long the remaining content will take (0 when none is left).
// Errors with one resource do not stop the others; they are joined in the result.
func (c *Controller) deleteAllContent(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, int64, error) {
	var errs []error
	conds := &conditionUpdater{now: metav1.NewTime(c.clock.Now())}
	lists, err := c.discoverResources(ctx)
	if err != nil {
		// Not fatal: some groups may have failed while the others are usable.
		errs = append(errs, err)
		conds.discoveryFailed(err)
	}
	resources, err := deletableResources(lists)
	if err != nil {
		errs = append(errs, err)
		conds.groupVersionFailed(err)
	}
	totals := remainingTotals{byResource: map[schema.GroupVersionResource]int{}, byFinalizer: map[string]int{}}
	var estimate int64
	for _, r := range resources {
		res, err := c.deleteResource(ctx, r, ns)
		if err != nil {
			errs = append(errs, err)
			conds.contentFailed(err)
		}
		estimate = max(estimate, res.estimate)
		if res.remaining > 0 {
			totals.byResource[r.gvr] += res.remaining
			for f, n := range res.byFinalizer {
				totals.byFinalizer[f] += n
			}
		}
	}
	conds.contentRemaining(totals)

	// Always reconcile the conditions: a condition that failed before may be fine now.
	updated := ns.DeepCopy()
	if conds.apply(&updated.Status) {
		out, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			c.log.Error("failed to update namespace conditions", "namespace", ns.Name, "err", err)
		} else {
			ns = out
		}
	}
	return ns, estimate, errors.Join(errs...)
}

// discoverResources lists the preferred version of every namespaced resource. The shared
// discovery is cached; it is refreshed when older than discoveryMaxAge and after an error.
func (c *Controller) discoverResources(ctx context.Context) ([]*metav1.APIResourceList, error) {
	cached, isCached := c.discovery.(discovery.CachedDiscoveryInterface)
	if isCached {
		c.discoveryMu.Lock()
		if c.discoveryRefreshedAt.IsZero() || c.clock.Since(c.discoveryRefreshedAt) > discoveryMaxAge {
			cached.Invalidate()
			c.discoveryRefreshedAt = c.clock.Now()
		}
		c.discoveryMu.Unlock()
	}
	lists, err := discovery.ServerPreferredNamespacedResourcesWithContext(ctx, discovery.ToDiscoveryInterfaceWithContext(c.discovery))
	if err != nil {
		if isCached {
			c.discoveryMu.Lock()
			c.discoveryRefreshedAt = time.Time{}
			c.discoveryMu.Unlock()
		}
		return lists, fmt.Errorf("failed to discover namespaced resources: %w", err)
	}
	return lists, nil
}

// deletableResources picks the resources that support delete, sorted for a stable order.
func deletableResources(lists []*metav1.APIResourceList) ([]deletableResource, error) {
	var out []deletableResource
	var errs []error
	for _, l := range lists {
		if l == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to parse group version %q: %w", l.GroupVersion, err))
			continue
		}
		for _, r := range l.APIResources {
			if !r.Namespaced || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, deletableResource{gvr: gv.WithResource(r.Name), verbs: r.Verbs})
		}
	}
	slices.SortFunc(out, func(a, b deletableResource) int {
		return strings.Compare(a.gvr.String(), b.gvr.String())
	})
	return out, errors.Join(errs...)
}

// deleteResource deletes every item of one resource in ns and reports what is left.
func (c *Controller) deleteResource(ctx context.Context, r deletableResource, ns *corev1.Namespace) (resourceResult, error) {
	estimate, err := c.estimateGracefulTermination(ctx, r.gvr, ns)
	if err != nil {
		return resourceResult{}, err
	}
	supported, err := c.deleteCollection(ctx, r, ns.Name)
	if err != nil {
		return resourceResult{estimate: estimate}, err
	}
	if !supported {
		if err := c.deleteEachItem(ctx, r, ns.Name); err != nil {
			return resourceResult{estimate: estimate}, err
		}
	}
	list, supported, err := c.listCollection(ctx, r, ns.Name)
	if err != nil || !supported {
		return resourceResult{estimate: estimate}, err
	}
	if len(list.Items) == 0 {
		return resourceResult{}, nil
	}
	res := resourceResult{estimate: estimate, remaining: len(list.Items), byFinalizer: map[string]int{}}
	terminating := 0
	for _, item := range list.Items {
		for _, f := range item.Finalizers {
			res.byFinalizer[f]++
		}
		if item.DeletionTimestamp != nil {
			terminating++
		}
	}
	switch {
	case res.estimate > 0:
	case len(res.byFinalizer) > 0:
		// Finalizers are a normal wait: give their controllers time to finish.
		res.estimate = finalizerEstimateSeconds
	case terminating == len(list.Items):
		// Graceful deletion past its grace period: wait for the confirmation.
		res.estimate = overdueEstimateSeconds
	default:
		return res, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns.Name, r.gvr)
	}
	return res, nil
}

// deleteCollection deletes all items of a resource in one request. It reports false
// when the server does not support that, so that the caller deletes item by item.
func (c *Controller) deleteCollection(ctx context.Context, r deletableResource, ns string) (bool, error) {
	if !r.supports("deletecollection") {
		return false, nil
	}
	// Background propagation: the garbage collector must not add the orphan finalizer,
	// everything in the namespace goes anyway.
	err := c.metadata.Resource(r.gvr).Namespace(ns).DeleteCollection(ctx, backgroundDelete(), metav1.ListOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
		return false, nil
	default:
		return true, fmt.Errorf("failed to delete the collection of %s: %w", r.gvr, err)
	}
}

// listCollection lists the items of a resource in ns; false means listing is not supported.
func (c *Controller) listCollection(ctx context.Context, r deletableResource, ns string) (*metav1.PartialObjectMetadataList, bool, error) {
	if !r.supports("list") {
		return nil, false, nil
	}
	list, err := c.metadata.Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		return list, true, nil
	case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
		return nil, false, nil
	default:
		return nil, true, fmt.Errorf("failed to list %s: %w", r.gvr, err)
	}
}

// deleteEachItem lists a resource and deletes its items one by one.
func (c *Controller) deleteEachItem(ctx context.Context, r deletableResource, ns string) error {
	list, supported, err := c.listCollection(ctx, r, ns)
	if err != nil || !supported {
		return err
	}
	for _, item := range list.Items {
		err := c.metadata.Resource(r.gvr).Namespace(ns).Delete(ctx, item.Name, backgroundDelete())
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			return fmt.Errorf("failed to delete %s %q: %w", r.gvr, item.Name, err)
		}
	}
	return nil
}

func backgroundDelete() metav1.DeleteOptions {
	background := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &background}
}

// estimateGracefulTermination estimates, in seconds, how long the graceful deletion of
// a resource's items takes. Only pods have one: the longest termination grace period
// of a pod that has not finished, or 0 once that long has passed since the namespace
// was deleted.
func (c *Controller) estimateGracefulTermination(ctx context.Context, gvr schema.GroupVersionResource, ns *corev1.Namespace) (int64, error) {
	if gvr.Group != "" || gvr.Resource != "pods" {
		return 0, nil
	}
	pods, err := c.client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("failed to list pods to estimate their termination: %w", err)
	}
	var estimate int64
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			estimate = max(estimate, *g)
		}
	}
	if c.clock.Since(ns.DeletionTimestamp.Time) >= time.Duration(estimate)*time.Second {
		return 0, nil
	}
	return estimate, nil
}
