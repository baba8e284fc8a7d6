package garbagecollector

import (
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

type eventType int

const (
	addEvent eventType = iota
	updateEvent
	deleteEvent
)

func (e eventType) String() string {
	switch e {
	case addEvent:
		return "add"
	case updateEvent:
		return "update"
	case deleteEvent:
		return "delete"
	}
	return "unknown"
}

// event is a change seen by a monitor, or a virtual delete produced by a worker that found
// an object absent at the API server.
type event struct {
	typ     eventType
	virtual bool
	gvk     schema.GroupVersionKind
	obj     metav1.Object
	// old is the previous state for an update.
	old metav1.Object
}

// builder turns monitor events into the dependency graph, one event at a time on one
// goroutine, and enqueues the UIDs whose state may call for garbage collection.
type builder struct {
	graph    *graph
	absent   *absentCache
	changes  workqueue.TypedInterface[*event]
	toDelete workqueue.TypedRateLimitingInterface[types.UID]
	toOrphan workqueue.TypedRateLimitingInterface[types.UID]
	recorder record.EventRecorder
	log      *slog.Logger
}

// handlers returns the informer event handlers for objects of kind gvk.
func (b *builder) handlers(gvk schema.GroupVersionKind) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, err := meta.Accessor(obj); err == nil {
				b.changes.Add(&event{typ: addEvent, gvk: gvk, obj: o})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, err := meta.Accessor(oldObj)
			if err != nil {
				return
			}
			n, err := meta.Accessor(newObj)
			if err != nil || !relevantChange(o, n) {
				return
			}
			b.changes.Add(&event{typ: updateEvent, gvk: gvk, obj: n, old: o})
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, err := meta.Accessor(obj); err == nil {
				b.changes.Add(&event{typ: deleteEvent, gvk: gvk, obj: o})
			}
		},
	}
}

// enqueueVirtualDelete records that the object id is absent at the API server.
func (b *builder) enqueueVirtualDelete(id objectReference) {
	gv, _ := schema.ParseGroupVersion(id.APIVersion)
	b.changes.Add(&event{
		typ:     deleteEvent,
		virtual: true,
		gvk:     gv.WithKind(id.Kind),
		obj:     &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name, UID: id.UID}},
	})
}

// run processes graph changes until the changes queue shuts down.
func (b *builder) run() {
	for {
		ev, quit := b.changes.Get()
		if quit {
			return
		}
		b.process(ev)
		b.changes.Done(ev)
	}
}

func identityOf(gvk schema.GroupVersionKind, o metav1.Object) objectReference {
	return objectReference{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Name:       o.GetName(),
		UID:        o.GetUID(),
		Namespace:  o.GetNamespace(),
	}
}

// process applies one event to the graph.
func (b *builder) process(ev *event) {
	b.graph.mu.Lock()
	defer b.graph.mu.Unlock()
	o := ev.obj
	uid := o.GetUID()
	b.log.Debug("graph change", "event", ev.typ, "virtual", ev.virtual, "kind", ev.gvk.Kind,
		"namespace", o.GetNamespace(), "name", o.GetName(), "uid", uid)

	existing, found := b.graph.nodes[uid]
	if found && !ev.virtual && existing.virtual {
		// First observation of an object known so far only from references.
		observed := identityOf(ev.gvk, o)
		if observed != existing.identity {
			// Dependents that named it by other coordinates may be wrong: verify them.
			_, suspects := partitionDependents(existing.dependentList(), observed)
			for _, d := range suspects {
				if observed.Namespace != "" && d.identity.Namespace != observed.Namespace {
					b.reportInvalidNamespace(d, observed.UID)
				}
				b.toDelete.Add(d.identity.UID)
			}
			existing.identity = observed
		}
		existing.virtual = false
	}

	switch {
	case ev.typ != deleteEvent && !found:
		n := &node{
			identity:           identityOf(ev.gvk, o),
			owners:             slices.Clone(o.GetOwnerReferences()),
			dependents:         make(map[*node]struct{}),
			beingDeleted:       beingDeleted(o),
			deletingDependents: beingDeleted(o) && hasFinalizer(o, metav1.FinalizerDeleteDependents),
		}
		b.graph.nodes[uid] = n
		b.addDependentToOwners(n, n.owners)
		b.processTransitions(ev.old, o, n)
	case ev.typ != deleteEvent && found:
		if !ev.virtual {
			existing.identity.APIVersion = ev.gvk.GroupVersion().String()
			existing.identity.Kind = ev.gvk.Kind
		}
		added, removed, changed := referencesDiff(existing.owners, o.GetOwnerReferences())
		if len(added)+len(removed)+len(changed) > 0 {
			for _, owner := range unblockedOwners(removed, changed) {
				if _, ok := b.graph.nodes[owner]; ok {
					b.toDelete.Add(owner)
				}
			}
			existing.owners = slices.Clone(o.GetOwnerReferences())
			b.addDependentToOwners(existing, added)
			b.removeDependentFromOwners(existing, removed)
		}
		if beingDeleted(o) {
			existing.beingDeleted = true
		}
		b.processTransitions(ev.old, o, existing)
	case ev.typ == deleteEvent && found:
		b.processDelete(ev, existing)
	}
}

// processDelete handles an observed or virtual delete of a node in the graph.
func (b *builder) processDelete(ev *event, existing *node) {
	remove := true
	if ev.virtual {
		deleted := identityOf(ev.gvk, ev.obj)
		switch {
		case existing.virtual:
			// Dependents may disagree on the owner's coordinates; only those naming the
			// verified-absent identity learn that it is gone.
			matching, nonmatching := partitionDependents(existing.dependentList(), deleted)
			if len(nonmatching) > 0 {
				remove = false
				if len(matching) > 0 {
					b.absent.add(deleted)
					for _, d := range matching {
						b.toDelete.Add(d.identity.UID)
					}
				}
				if existing.identity == deleted {
					if alt := alternateIdentity(nonmatching, deleted); alt != nil {
						b.log.Debug("verifying virtual owner under another identity", "absent", deleted, "next", *alt)
						existing.identity = *alt
						b.toDelete.AddRateLimited(existing.identity.UID)
					}
				}
			}
		case existing.identity != deleted:
			// A real object must not be removed because another identity is absent.
			remove = false
			matching, _ := partitionDependents(existing.dependentList(), deleted)
			if len(matching) > 0 {
				b.absent.add(deleted)
				for _, d := range matching {
					b.toDelete.Add(d.identity.UID)
				}
			}
		}
	}
	if !remove {
		return
	}
	delete(b.graph.nodes, existing.identity.UID)
	b.removeDependentFromOwners(existing, existing.owners)
	if len(existing.dependents) > 0 {
		b.absent.add(identityOf(ev.gvk, ev.obj))
	}
	for d := range existing.dependents {
		b.toDelete.Add(d.identity.UID)
	}
	for _, ref := range existing.owners {
		// An owner deleting its dependents may be waiting for this one.
		if owner, ok := b.graph.nodes[ref.UID]; ok && owner.deletingDependents {
			b.toDelete.Add(ref.UID)
		}
	}
}

// processTransitions starts orphaning or foreground deletion when an object starts being
// deleted with the matching finalizer.
func (b *builder) processTransitions(old, cur metav1.Object, n *node) {
	if deletionStartsWith(old, cur, metav1.FinalizerOrphanDependents) {
		b.log.Debug("orphaning dependents", "item", n.identity)
		b.toOrphan.Add(n.identity.UID)
		return
	}
	if deletionStartsWith(old, cur, metav1.FinalizerDeleteDependents) {
		b.log.Debug("deleting dependents in the foreground", "item", n.identity)
		n.deletingDependents = true
		for d := range n.dependents {
			b.toDelete.Add(d.identity.UID)
		}
		b.toDelete.Add(n.identity.UID)
	}
}

// addDependentToOwners links n under each of owners, creating virtual nodes for owners not
// in the graph (queued so that a worker verifies them), and queues n itself when one of its
// references disagrees with what the graph knows of that owner or an owner is already
// deleting its dependents in the foreground.
func (b *builder) addDependentToOwners(n *node, owners []metav1.OwnerReference) {
	suspect, ownerDeleting := false, false
	for _, ref := range owners {
		owner, ok := b.graph.nodes[ref.UID]
		if !ok {
			owner = &node{
				identity:   refIdentity(ref, n.identity.Namespace),
				dependents: make(map[*node]struct{}),
				virtual:    true,
			}
			b.graph.nodes[ref.UID] = owner
			b.log.Debug("added virtual owner", "owner", owner.identity)
		}
		owner.dependents[n] = struct{}{}
		if !ok {
			b.toDelete.Add(ref.UID)
			continue
		}
		if owner.deletingDependents {
			// The owner's foreground deletion started before this dependent was seen
			// (the informers listed it after the owner): it must go like the others.
			ownerDeleting = true
		}
		if suspect {
			continue
		}
		ownerNamespaced := owner.identity.Namespace != ""
		switch {
		case ownerNamespaced && owner.identity.Namespace != n.identity.Namespace:
			// A namespaced owner must live in the dependent's namespace.
			if !owner.virtual {
				b.reportInvalidNamespace(n, ref.UID)
			}
			suspect = true
		case !matchesCoordinates(ref, owner.identity):
			suspect = true
		case !ownerNamespaced && n.identity.Namespace != "" && owner.virtual:
			// A virtual cluster-scoped owner may really be a missing namespaced one
			// referenced by a cluster-scoped dependent.
			suspect = true
		}
	}
	if suspect || ownerDeleting {
		b.toDelete.Add(n.identity.UID)
	}
}

// removeDependentFromOwners unlinks n from the listed owners.
func (b *builder) removeDependentFromOwners(n *node, owners []metav1.OwnerReference) {
	for _, ref := range owners {
		if owner, ok := b.graph.nodes[ref.UID]; ok {
			delete(owner.dependents, n)
		}
	}
}

// reportInvalidNamespace records a warning Event on n for a reference to an owner in
// another namespace.
func (b *builder) reportInvalidNamespace(n *node, owner types.UID) {
	if b.recorder == nil {
		return
	}
	i := slices.IndexFunc(n.owners, func(r metav1.OwnerReference) bool { return r.UID == owner })
	if i < 0 {
		return
	}
	ref := n.owners[i]
	b.recorder.Eventf(&corev1.ObjectReference{
		APIVersion: n.identity.APIVersion, Kind: n.identity.Kind, Namespace: n.identity.Namespace,
		Name: n.identity.Name, UID: n.identity.UID,
	}, corev1.EventTypeWarning, "OwnerRefInvalidNamespace",
		"ownerRef [%s/%s, namespace: %s, name: %s, uid: %s] does not exist in namespace %q",
		ref.APIVersion, ref.Kind, n.identity.Namespace, ref.Name, ref.UID, n.identity.Namespace)
}
