// Package history keeps the ControllerRevisions of a DaemonSet or StatefulSet: the
// snapshots of its pod template that its pods are labelled with and that
// `kubectl rollout undo` goes back to. It names, hashes, orders and compares
// revisions, and finds or makes the revision of a workload's current template, as
// upstream's controller history (k8s.io/kubernetes pkg/controller/history) behaves:
// an equal older revision is reused with a new revision number (a rollback), a hash
// collision with a different revision moves the collision count on.
package history

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controller/ownerref"
)

// HashLabel is the label of a revision and of its pods that carries the revision's hash
// (DaemonSets) or name (StatefulSets).
const HashLabel = appsv1.ControllerRevisionHashLabelKey

// Hash returns the hash of a revision's data and the collision count (when not nil):
// the FNV-32 of the data, then of the count in decimal, in the alphabet of safe name
// characters.
func Hash(rev *appsv1.ControllerRevision, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(rev.Data.Raw)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// Name is the name of the revision of parent with hash: "<parent>-<hash>", the
// parent's part cut so that the whole is a valid name.
func Name(parent, hash string) string {
	if max := validation.DNS1123SubdomainMaxLength - len(hash) - 1; len(parent) > max {
		parent = parent[:max]
	}
	return parent + "-" + hash
}

// New returns the revision number revision of parent (of kind gvk) holding data, named
// and labelled after its hash with collisionCount: the template's labels plus the hash
// label, and parent's annotations (kubectl rollout history shows their change-cause).
func New(parent metav1.Object, gvk schema.GroupVersionKind, templateLabels map[string]string, data []byte, revision int64, collisionCount *int32) *appsv1.ControllerRevision {
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       parent.GetNamespace(),
			Labels:          map[string]string{},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*ownerref.NewControllerRef(parent, gvk)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}
	for k, v := range templateLabels {
		rev.Labels[k] = v
	}
	for k, v := range parent.GetAnnotations() {
		rev.Annotations[k] = v
	}
	hash := Hash(rev, collisionCount)
	rev.Name = Name(parent.GetName(), hash)
	rev.Labels[HashLabel] = hash
	return rev
}

// Equal reports whether two revisions hold the same data (their hashes may differ by
// the collision count they were made with).
func Equal(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// FindEqual returns the revisions equal to rev, in the order of revisions.
func FindEqual(revisions []*appsv1.ControllerRevision, rev *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var out []*appsv1.ControllerRevision
	for _, r := range revisions {
		if Equal(r, rev) {
			out = append(out, r)
		}
	}
	return out
}

// Sort orders revisions by revision number, then creation time, then name.
func Sort(revisions []*appsv1.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Next is the revision number after the highest of revisions (1 for none).
func Next(revisions []*appsv1.ControllerRevision) int64 {
	var max int64
	for _, r := range revisions {
		if r.Revision > max {
			max = r.Revision
		}
	}
	return max + 1
}

// Client writes revisions through the API.
type Client struct {
	Client kubernetes.Interface
}

// Create creates rev for parent. When a revision of that name exists and holds the same
// data it is returned; when it holds other data (a hash collision) collisionCount is
// moved on and the revision is renamed until its name is free.
func (c Client) Create(ctx context.Context, parent metav1.Object, rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, fmt.Errorf("collisionCount should not be nil")
	}
	for {
		clone := rev.DeepCopy()
		hash := Hash(clone, collisionCount)
		clone.Name = Name(parent.GetName(), hash)
		clone.Labels[HashLabel] = hash
		created, err := c.Client.AppsV1().ControllerRevisions(parent.GetNamespace()).Create(ctx, clone, metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create revision %s: %w", clone.Name, err)
		}
		existing, err := c.Client.AppsV1().ControllerRevisions(parent.GetNamespace()).Get(ctx, clone.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("failed to read revision %s: %w", clone.Name, err)
		}
		if bytes.Equal(existing.Data.Raw, clone.Data.Raw) {
			if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == parent.GetUID() {
				return existing, nil
			}
		}
		*collisionCount++
	}
}

// SetRevision gives rev a new revision number (a rollback to it makes it the newest).
func (c Client) SetRevision(ctx context.Context, rev *appsv1.ControllerRevision, revision int64) (*appsv1.ControllerRevision, error) {
	if rev.Revision == revision {
		return rev, nil
	}
	clone := rev.DeepCopy()
	clone.Revision = revision
	updated, err := c.Client.AppsV1().ControllerRevisions(rev.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to update revision %s to %d: %w", rev.Name, revision, err)
	}
	return updated, nil
}

// Delete deletes rev (a revision already gone counts as deleted).
func (c Client) Delete(ctx context.Context, rev *appsv1.ControllerRevision) error {
	err := c.Client.AppsV1().ControllerRevisions(rev.Namespace).Delete(ctx, rev.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &rev.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete revision %s: %w", rev.Name, err)
	}
	return nil
}

// Snapshot returns the revision of want (built by New with the next revision number)
// among the sorted revisions of parent, creating it when none is equal and making the
// newest equal one the latest when an older template came back (a rollback). Equal
// duplicates beyond the one kept are returned in dups for the caller to delete.
func (c Client) Snapshot(ctx context.Context, parent metav1.Object, revisions []*appsv1.ControllerRevision, want *appsv1.ControllerRevision, collisionCount *int32) (rev *appsv1.ControllerRevision, dups []*appsv1.ControllerRevision, err error) {
	equal := FindEqual(revisions, want)
	switch {
	case len(equal) == 0:
		rev, err = c.Create(ctx, parent, want, collisionCount)
		return rev, nil, err
	case len(revisions) > 0 && Equal(revisions[len(revisions)-1], equal[len(equal)-1]):
		rev = equal[len(equal)-1]
	default:
		if rev, err = c.SetRevision(ctx, equal[len(equal)-1], want.Revision); err != nil {
			return nil, nil, err
		}
	}
	return rev, equal[:len(equal)-1], nil
}
