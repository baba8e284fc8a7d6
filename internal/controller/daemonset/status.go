package daemonset

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller/podstate"
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// calculateStatus counts, over the nodes, those that should run the daemon (desired),
// run it (current), run it where they should not (misscheduled), and whose oldest pod
// is ready, available and of the current template.
func (c *Controller) calculateStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, collisionCount *int32) appsv1.DaemonSetStatus {
	tmpl := podTemplate(ds, hash)
	gen, hasGen := templateGeneration(ds)
	now := metav1.NewTime(c.clock.Now())
	s := appsv1.DaemonSetStatus{
		ObservedGeneration: ds.Generation,
		CollisionCount:     collisionCount,
		Conditions:         ds.Status.Conditions,
	}
	for _, node := range nodes {
		run, _ := shouldRun(tmpl, node)
		pods := byNode[node.Name]
		if !run {
			if len(pods) > 0 {
				s.NumberMisscheduled++
			}
			continue
		}
		s.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		s.CurrentNumberScheduled++
		sorted := append([]*corev1.Pod(nil), pods...)
		sortOldestFirst(sorted)
		p := sorted[0]
		if podstate.IsPodReady(p) {
			s.NumberReady++
			if podstate.IsPodAvailable(p, ds.Spec.MinReadySeconds, now) {
				s.NumberAvailable++
			}
		}
		if isUpdated(p, hash, gen, hasGen) {
			s.UpdatedNumberScheduled++
		}
	}
	s.NumberUnavailable = s.DesiredNumberScheduled - s.NumberAvailable
	return s
}

// updateStatus writes the DaemonSet's status when it changed, and looks again after
// minReadySeconds while ready pods wait to become available.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, collisionCount *int32) error {
	status := c.calculateStatus(ds, nodes, byNode, hash, collisionCount)
	if ds.Spec.MinReadySeconds > 0 && status.NumberReady != status.NumberAvailable {
		c.requeueAfter(ds, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	if equality.Semantic.DeepEqual(status, ds.Status) {
		return nil
	}
	api := c.client.AppsV1().DaemonSets(ds.Namespace)
	next := ds.DeepCopy()
	for attempt := 0; ; attempt++ {
		next.Status = status
		_, err := api.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return fmt.Errorf("failed to update the status of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		// The cache was behind: write the same counts onto the newest object.
		if next, err = api.Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("failed to read DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if next.Generation != ds.Generation {
			return nil // the spec moved on: the next sync counts again
		}
	}
}
