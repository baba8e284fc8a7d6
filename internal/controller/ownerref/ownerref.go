// Package ownerref implements how a controller takes and gives up control of
// the objects its selector picks, as upstream's ControllerRefManager does
// (k8s.io/kubernetes pkg/controller/controller_ref_manager.go): owned objects
// that still match are kept, owned objects that no longer match are released,
// matching orphans are adopted, and objects controlled by another owner are
// left alone.
package ownerref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// NewControllerRef returns an owner reference to owner of kind gvk with
// controller and blockOwnerDeletion set, as controllers put on what they create.
func NewControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

type adoptPatch struct {
	Metadata adoptPatchMeta `json:"metadata"`
}

type adoptPatchMeta struct {
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	UID             types.UID               `json:"uid"`
}

type releasePatch struct {
	Metadata releasePatchMeta `json:"metadata"`
}

type releasePatchMeta struct {
	OwnerReferences []releasePatchRef `json:"ownerReferences"`
	UID             types.UID         `json:"uid"`
}

type releasePatchRef struct {
	Patch string    `json:"$patch"`
	UID   types.UID `json:"uid"`
}

// AdoptPatch returns the strategic merge patch that makes owner the controller
// of the object with UID objUID:
// {"metadata":{"ownerReferences":[<controller ref>],"uid":"<objUID>"}}.
// The uid makes the API server reject the patch (409) when the object was
// replaced by another of the same name; the server rejects it (422) when the
// object already has another controller.
func AdoptPatch(owner metav1.Object, gvk schema.GroupVersionKind, objUID types.UID) []byte {
	b, err := json.Marshal(adoptPatch{Metadata: adoptPatchMeta{
		OwnerReferences: []metav1.OwnerReference{*NewControllerRef(owner, gvk)},
		UID:             objUID,
	}})
	if err != nil {
		panic(fmt.Sprintf("marshal adopt patch: %v", err)) // fixed types: cannot fail
	}
	return b
}

// ReleasePatch returns the strategic merge patch that removes the owner
// reference to ownerUID from the object with UID objUID:
// {"metadata":{"ownerReferences":[{"$patch":"delete","uid":"<ownerUID>"}],"uid":"<objUID>"}}.
func ReleasePatch(ownerUID, objUID types.UID) []byte {
	b, err := json.Marshal(releasePatch{Metadata: releasePatchMeta{
		OwnerReferences: []releasePatchRef{{Patch: "delete", UID: ownerUID}},
		UID:             objUID,
	}})
	if err != nil {
		panic(fmt.Sprintf("marshal release patch: %v", err)) // fixed types: cannot fail
	}
	return b
}

// RecheckOwner returns a canAdopt function for Claim: it reads the owner
// afresh with get (a quorum read from the API server, not a cache) and refuses
// adoption when the owner was replaced by another object of the same name (its
// UID changed) or is being deleted.
func RecheckOwner(owner metav1.Object, get func(ctx context.Context) (metav1.Object, error)) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return fmt.Errorf("can't recheck owner %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("original %s/%s is gone: got uid %s, wanted %s",
				owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%s/%s has just been deleted at %v",
				fresh.GetNamespace(), fresh.GetName(), fresh.GetDeletionTimestamp())
		}
		return nil
	}
}

// Claim sorts objs by who controls them and reconciles owner's control of
// them, returning the objects owner controls afterwards (in input order):
//
//   - controlled by owner (its controller reference has owner's UID): kept when
//     its labels match selector; otherwise released with release, unless owner
//     is being deleted (then just dropped). A release that finds the object
//     gone (404) or already changed (422) counts as done.
//   - controlled by another owner: ignored.
//   - an orphan whose labels match: adopted with adopt, unless owner or the
//     object is being deleted. Before the first adoption canAdopt (if not nil)
//     is called once; if it fails, no orphan is adopted. An adoption that finds
//     the object gone (404) is skipped.
//
// Errors of individual objects do not stop the others: they are joined and
// returned with the objects claimed so far, and the caller should retry later.
func Claim[T metav1.Object](
	ctx context.Context,
	owner metav1.Object,
	ownerGVK schema.GroupVersionKind,
	selector labels.Selector,
	objs []T,
	adopt func(ctx context.Context, obj T) error,
	release func(ctx context.Context, obj T) error,
	canAdopt func(ctx context.Context) error,
) ([]T, error) {
	var (
		claimed     []T
		errs        []error
		checked     bool
		canAdoptErr error
	)
	ownerDeleting := owner.GetDeletionTimestamp() != nil
	for _, obj := range objs {
		match := selector.Matches(labels.Set(obj.GetLabels()))
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			if ref.UID != owner.GetUID() {
				continue // another controller's
			}
			if match {
				claimed = append(claimed, obj)
				continue
			}
			if ownerDeleting {
				continue
			}
			if err := release(ctx, obj); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				errs = append(errs, fmt.Errorf("failed to release %s %s/%s from %s %s: %w",
					kindOf(obj), obj.GetNamespace(), obj.GetName(), ownerGVK.Kind, owner.GetName(), err))
			}
			continue
		}
		if ownerDeleting || !match || obj.GetDeletionTimestamp() != nil {
			continue
		}
		if !checked {
			checked = true
			if canAdopt != nil {
				canAdoptErr = canAdopt(ctx)
			}
		}
		if canAdoptErr != nil {
			errs = append(errs, fmt.Errorf("can't adopt %s %s/%s (%s): %w",
				kindOf(obj), obj.GetNamespace(), obj.GetName(), obj.GetUID(), canAdoptErr))
			continue
		}
		if err := adopt(ctx, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("failed to adopt %s %s/%s into %s %s: %w",
				kindOf(obj), obj.GetNamespace(), obj.GetName(), ownerGVK.Kind, owner.GetName(), err))
			continue
		}
		claimed = append(claimed, obj)
	}
	return claimed, errors.Join(errs...)
}

// kindOf names obj's Go type for messages ("Pod", "ReplicaSet").
func kindOf(obj any) string {
	s := fmt.Sprintf("%T", obj)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return s[i+1:]
		}
	}
	return s
}
