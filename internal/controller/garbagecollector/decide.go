package garbagecollector

import (
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds the garbage collector's decisions as pure functions of what it
// observed: they make no API calls and touch no shared state.

// refClass is what an owner reference points at.
type refClass int

const (
	// refSolid: the owner exists and is not waiting for its dependents' deletion.
	refSolid refClass = iota
	// refDangling: no object with that name and UID exists.
	refDangling
	// refWaiting: the owner exists, is being deleted and holds the foregroundDeletion
	// finalizer ("waitingForDependentsDeletion" upstream).
	refWaiting
)

// classifyOwner classifies ref given the live object at the reference's name (nil when the
// GET found nothing).
func classifyOwner(ref metav1.OwnerReference, live metav1.Object) refClass {
	if live == nil || live.GetUID() != ref.UID {
		return refDangling
	}
	if live.GetDeletionTimestamp() != nil && hasFinalizer(live, metav1.FinalizerDeleteDependents) {
		return refWaiting
	}
	return refSolid
}

// classification sorts a dependent's owner references by refClass.
type classification struct {
	solid, dangling, waiting []metav1.OwnerReference
}

func (c *classification) add(ref metav1.OwnerReference, class refClass) {
	switch class {
	case refSolid:
		c.solid = append(c.solid, ref)
	case refDangling:
		c.dangling = append(c.dangling, ref)
	case refWaiting:
		c.waiting = append(c.waiting, ref)
	}
}

// decisionKind is what attemptToDelete does with an item.
type decisionKind int

const (
	// decideNothing: the item stays as it is.
	decideNothing decisionKind = iota
	// decideRemoveRefs: the item has a live owner; drop the references listed in remove.
	decideRemoveRefs
	// decideDelete: delete the item with policy (after unblocking its own references if unblock).
	decideDelete
)

// decision is the outcome of decide.
type decision struct {
	kind    decisionKind
	remove  []types.UID
	policy  metav1.DeletionPropagation
	unblock bool
}

// decide applies upstream's rules to an item with at least one owner reference:
//   - a solid owner keeps the item alive; dangling references and references to owners
//     waiting for their dependents are removed (else those owners would wait forever);
//   - with no solid owner, an owner waiting for dependents and dependents of its own, the
//     item is deleted in the foreground, so the wait propagates down the chain; if one of
//     its dependents is itself deleting its dependents, the item first unblocks its own
//     references to avoid a cycle;
//   - otherwise the item is deleted, honouring an orphan or foregroundDeletion finalizer it
//     already carries, else in the background.
func decide(c classification, finalizers []string, hasDependents, dependentDeletingDependents bool) decision {
	switch {
	case len(c.solid) > 0:
		if len(c.dangling) == 0 && len(c.waiting) == 0 {
			return decision{kind: decideNothing}
		}
		remove := append(refUIDs(c.dangling), refUIDs(c.waiting)...)
		return decision{kind: decideRemoveRefs, remove: remove}
	case len(c.waiting) > 0 && hasDependents:
		return decision{kind: decideDelete, policy: metav1.DeletePropagationForeground, unblock: dependentDeletingDependents}
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case slices.Contains(finalizers, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case slices.Contains(finalizers, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return decision{kind: decideDelete, policy: policy}
}

func refUIDs(refs []metav1.OwnerReference) []types.UID {
	out := make([]types.UID, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.UID)
	}
	return out
}

// blockingDependents returns the dependents whose reference to owner has
// blockOwnerDeletion: true; a foreground deletion of owner waits for them.
func blockingDependents(owner types.UID, dependents []nodeView) []nodeView {
	var out []nodeView
	for _, d := range dependents {
		for _, ref := range d.owners {
			if ref.UID == owner && isBlocking(ref) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func isBlocking(ref metav1.OwnerReference) bool {
	return ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
}

func hasFinalizer(o metav1.Object, f string) bool {
	return slices.Contains(o.GetFinalizers(), f)
}

func beingDeleted(o metav1.Object) bool {
	return o.GetDeletionTimestamp() != nil
}

// deletionStartsWith reports whether the transition from old (nil for an add) to cur is
// the start of a deletion that holds finalizer: cur is being deleted with the finalizer and
// old was not.
func deletionStartsWith(old, cur metav1.Object, finalizer string) bool {
	if !beingDeleted(cur) || !hasFinalizer(cur, finalizer) {
		return false
	}
	return old == nil || !beingDeleted(old) || !hasFinalizer(old, finalizer)
}

// refChange is an owner reference whose fields other than the UID changed.
type refChange struct {
	old, cur metav1.OwnerReference
}

// referencesDiff compares two ownerReferences lists by UID.
func referencesDiff(old, cur []metav1.OwnerReference) (added, removed []metav1.OwnerReference, changed []refChange) {
	oldByUID := make(map[types.UID]metav1.OwnerReference, len(old))
	for _, r := range old {
		oldByUID[r.UID] = r
	}
	for _, r := range cur {
		o, ok := oldByUID[r.UID]
		if !ok {
			added = append(added, r)
			continue
		}
		if !reflect.DeepEqual(o, r) {
			changed = append(changed, refChange{old: o, cur: r})
		}
		delete(oldByUID, r.UID)
	}
	for _, r := range old {
		if _, ok := oldByUID[r.UID]; ok {
			removed = append(removed, r)
		}
	}
	return added, removed, changed
}

// unblockedOwners returns the UIDs of owners that a reference change stops blocking: a
// removed blocking reference, or one whose blockOwnerDeletion went from true to false/unset.
// Owners waiting for their dependents must look again.
func unblockedOwners(removed []metav1.OwnerReference, changed []refChange) []types.UID {
	var out []types.UID
	for _, r := range removed {
		if isBlocking(r) {
			out = append(out, r.UID)
		}
	}
	for _, c := range changed {
		if isBlocking(c.old) && !isBlocking(c.cur) {
			out = append(out, c.cur.UID)
		}
	}
	return out
}

// relevantChange reports whether an update changed anything the graph records: owner
// references, the deletion timestamp or the finalizers.
func relevantChange(old, cur metav1.Object) bool {
	return old.GetUID() != cur.GetUID() ||
		!reflect.DeepEqual(old.GetOwnerReferences(), cur.GetOwnerReferences()) ||
		!reflect.DeepEqual(old.GetDeletionTimestamp(), cur.GetDeletionTimestamp()) ||
		!slices.Equal(old.GetFinalizers(), cur.GetFinalizers())
}

// partitionDependents splits dependents into those whose reference to id.UID matches id's
// coordinates (and namespace, for a namespaced id) and those with a reference to id.UID
// that does not. A dependent with several references to the UID can land in both.
func partitionDependents(dependents []*node, id objectReference) (matching, nonmatching []*node) {
	namespaced := id.Namespace != ""
	for _, d := range dependents {
		match, mismatch := false, false
		if namespaced && d.identity.Namespace != id.Namespace {
			mismatch = true
		} else {
			for _, ref := range d.owners {
				if ref.UID != id.UID {
					continue
				}
				if matchesCoordinates(ref, id) {
					match = true
				} else {
					mismatch = true
				}
			}
		}
		if match {
			matching = append(matching, d)
		}
		if mismatch {
			nonmatching = append(nonmatching, d)
		}
	}
	return matching, nonmatching
}

// referenceLess orders identities by kind, apiVersion, namespace, name and uid.
func referenceLess(a, b objectReference) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.APIVersion != b.APIVersion {
		return a.APIVersion < b.APIVersion
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// alternateIdentity picks another identity under which dependents refer to the UID of
// absent, which was verified not to exist. It returns the first alternate that sorts after
// absent, else the first one, so that repeated verification walks through every alternate;
// nil when there is none.
func alternateIdentity(dependents []*node, absent objectReference) *objectReference {
	clusterScoped := absent.Namespace == ""
	var first, next *objectReference
	for _, d := range dependents {
		for _, ref := range d.owners {
			if ref.UID != absent.UID {
				continue
			}
			if matchesCoordinates(ref, absent) && (clusterScoped || absent.Namespace == d.identity.Namespace) {
				continue
			}
			alt := refIdentity(ref, d.identity.Namespace)
			if clusterScoped && alt.APIVersion == absent.APIVersion && alt.Kind == absent.Kind {
				// this kind is known to be cluster-scoped
				alt.Namespace = ""
			}
			if alt == absent {
				continue
			}
			if first == nil || referenceLess(alt, *first) {
				a := alt
				first = &a
			}
			if referenceLess(absent, alt) && (next == nil || referenceLess(alt, *next)) {
				a := alt
				next = &a
			}
		}
	}
	if next != nil {
		return next
	}
	return first
}
