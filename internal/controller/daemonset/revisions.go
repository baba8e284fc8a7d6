package daemonset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/controller/history"
	"github.com/kubette/kubette/internal/controller/ownerref"
)

// revisions are a DaemonSet's ControllerRevisions after a sync made the current one.
type revisions struct {
	cur *appsv1.ControllerRevision
	old []*appsv1.ControllerRevision
	// collisionCount is the status' collision count, moved on by a hash collision.
	collisionCount *int32
}

// constructHistory claims the DaemonSet's revisions and finds or makes the one of its
// current template: an equal older revision becomes the newest (a rollback). Equal
// duplicates (which only a client can make) are left to the history limit: upstream
// deletes them at once, which races with a client that just made one (the
// ControllerRevision conformance test does, and deletes the older one itself).
func (c *Controller) constructHistory(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) (*revisions, error) {
	all, err := c.revLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to list revisions: %w", err)
	}
	api := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	owned, err := ownerref.Claim(ctx, ds, controllerKind, selector, all,
		func(ctx context.Context, r *appsv1.ControllerRevision) error {
			_, err := api.Patch(ctx, r.Name, types.StrategicMergePatchType, ownerref.AdoptPatch(ds, controllerKind, r.UID), metav1.PatchOptions{})
			return err
		},
		func(ctx context.Context, r *appsv1.ControllerRevision) error {
			_, err := api.Patch(ctx, r.Name, types.StrategicMergePatchType, ownerref.ReleasePatch(ds.UID, r.UID), metav1.PatchOptions{})
			return err
		},
		c.recheck(ds))
	if err != nil {
		return nil, err
	}
	history.Sort(owned)
	data, err := history.TemplatePatch(&ds.Spec.Template)
	if err != nil {
		return nil, err
	}
	var count int32
	if ds.Status.CollisionCount != nil {
		count = *ds.Status.CollisionCount
	}
	want := history.New(ds, controllerKind, ds.Spec.Template.Labels, data, history.Next(owned), &count)
	cur, _, err := c.history.Snapshot(ctx, ds, owned, want, &count)
	if err != nil {
		return nil, err
	}
	out := &revisions{cur: cur}
	if ds.Status.CollisionCount != nil || count > 0 {
		out.collisionCount = &count
	}
	for _, r := range owned {
		if r.Name != cur.Name {
			out.old = append(out.old, r)
		}
	}
	return out, nil
}

// cleanupHistory deletes the oldest revisions beyond spec.revisionHistoryLimit that no
// pod runs any more.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, old []*appsv1.ControllerRevision, byNode map[string][]*corev1.Pod) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	extra := len(old) - limit
	if extra <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pods := range byNode {
		for _, p := range pods {
			live[p.Labels[history.HashLabel]] = true
		}
	}
	sorted := append([]*appsv1.ControllerRevision(nil), old...)
	history.Sort(sorted)
	for _, r := range sorted {
		if extra <= 0 {
			break
		}
		if live[r.Labels[history.HashLabel]] {
			continue
		}
		if err := c.history.Delete(ctx, r); err != nil {
			return err
		}
		extra--
	}
	return nil
}
