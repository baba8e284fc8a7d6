// Package registry describes every resource the API server serves: its group,
// version and kind, names, scope, storage key, subresources and the per-kind
// behaviour (status handling, generation, selectable fields) that the generic
// REST handlers apply.
package registry

import (
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one served resource such as apps/v1 deployments.
type Resource struct {
	// GroupVersion is the API group and version the resource is served at.
	GroupVersion schema.GroupVersion
	// Kind and ListKind name the Go types, e.g. Deployment and DeploymentList.
	Kind, ListKind string
	// Plural is the URL segment (deployments); Singular is its singular name (deployment).
	Plural, Singular string
	// Namespaced reports whether objects live in a namespace.
	Namespaced bool
	// ShortNames and Categories are advertised in discovery (deploy; all).
	ShortNames, Categories []string
	// StoragePrefix is the etcd key prefix without a trailing slash, e.g. /registry/deployments.
	StoragePrefix string
	// StorageVersion is the group-version objects are stored as; it differs from
	// GroupVersion when two API versions share one storage (events.k8s.io/v1 events).
	StorageVersion schema.GroupVersion
	// StorageKind is the kind stored; empty means Kind.
	StorageKind string
	// Subresources lists the served subresources: status, scale, binding, log, finalize, eviction.
	Subresources []string
	// AllowCreateOnUpdate lets PUT create a missing object (as upstream for endpoints, leases, ...).
	AllowCreateOnUpdate bool
	// Verbs limits the served verbs; empty means all of create, delete, deletecollection,
	// get, list, patch, update and watch.
	Verbs []string
	// ReturnDeletedObject answers an immediate DELETE with the deleted object instead of a
	// Success Status, as upstream's stores for pods, services, namespaces and serviceaccounts.
	ReturnDeletedObject bool
	// ExpiresWithEventTTL makes every write of an object (create, update, patch, the
	// marking for deletion) expire it after the API server's event TTL, as upstream's
	// --event-ttl does for both Event APIs, which share one storage.
	ExpiresWithEventTTL bool
	// NoWatchCache serves the resource from storage alone: lists and gets with
	// resourceVersion=0 read etcd and each watch is a watch of etcd, as upstream's
	// kube-apiserver does for both Event APIs (DefaultWatchCacheSizes gives events a
	// watch cache size of 0, which disables it). Events are written often (one per
	// scheduled pod) and read rarely, so a cache would decode and keep every one of them
	// for few readers.
	NoWatchCache bool
	// Virtual resources are computed per request and never stored (SelfSubjectReview).
	Virtual bool
	// Read serves get and list of a virtual resource (metrics.k8s.io's): set by the API
	// server, before it serves, to the Reader it was given; nil answers 503.
	Read Reader
	// ToServed converts a stored object (StorageVersion) to the served version and
	// ToStorage back; both are set when the two versions differ (events.k8s.io/v1
	// Events stored as core/v1, autoscaling/v1 HorizontalPodAutoscalers stored as
	// autoscaling/v2). ToServed's result may share memory with its argument. An error
	// is an object the other version cannot hold (a malformed round-trip annotation).
	ToServed, ToStorage func(obj runtime.Object) (runtime.Object, error)
	// Custom is set on the resources of a CustomResourceDefinition: their objects are
	// *unstructured.Unstructured, stored and served as JSON (see CustomResources).
	Custom *Custom
	// Strategy is what the kind does differently on the generic write path.
	Strategy Strategy
	// New returns an empty object; NewList an empty list.
	New, NewList func() runtime.Object
	// Fields returns the selectable fields of an object beyond metadata.name and
	// metadata.namespace, in a new set on each call (SelectableFields adds to it).
	Fields func(obj runtime.Object) fields.Set

	// shape caches what reflection says about the kind (set by NewTable).
	shape *shape
}

// shape is whether a kind has a spec and a status.
type shape struct{ spec, status bool }

// GroupResource returns the resource's group and plural name.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Plural}
}

// GroupVersionKind returns the kind served at the resource's group-version.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion.WithKind(r.Kind)
}

// StorageGVK returns the kind objects are stored as.
func (r *Resource) StorageGVK() schema.GroupVersionKind {
	k := r.StorageKind
	if k == "" {
		k = r.Kind
	}
	return r.StorageVersion.WithKind(k)
}

// HasSubresource reports whether sub is served.
func (r *Resource) HasSubresource(sub string) bool {
	for _, s := range r.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}

// Key returns the storage key of an object (namespace is ignored for cluster-scoped resources).
func (r *Resource) Key(namespace, name string) string {
	if r.Namespaced {
		return r.StoragePrefix + "/" + namespace + "/" + name
	}
	return r.StoragePrefix + "/" + name
}

// Prefix returns the key prefix, ending in "/", for a list in namespace ("" for all).
func (r *Resource) Prefix(namespace string) string {
	if r.Namespaced && namespace != "" {
		return r.StoragePrefix + "/" + namespace + "/"
	}
	return r.StoragePrefix + "/"
}

// SelectableFields returns every field a field selector may use on obj.
func (r *Resource) SelectableFields(obj runtime.Object) fields.Set {
	var set fields.Set
	if r.Fields != nil {
		set = r.Fields(obj) // a set of its own: the metadata fields go into it
	}
	if set == nil {
		set = make(fields.Set, 2)
	}
	if m, err := meta.Accessor(obj); err == nil {
		set["metadata.name"] = m.GetName()
		if r.Namespaced {
			set["metadata.namespace"] = m.GetNamespace()
		}
	}
	return set
}

// SupportsField reports whether a field selector on field is allowed for this resource.
func (r *Resource) SupportsField(field string) bool {
	if field == "metadata.name" || field == "metadata.namespace" {
		return true
	}
	if r.Fields == nil {
		return false
	}
	_, ok := r.Fields(r.New())[field]
	return ok
}

// HasSpec reports whether the kind has a spec field (its generation tracks spec changes).
func (r *Resource) HasSpec() bool {
	if r.shape != nil {
		return r.shape.spec
	}
	return hasField(r.New(), "Spec")
}

// HasStatus reports whether the kind has a status field.
func (r *Resource) HasStatus() bool {
	if r.shape != nil {
		return r.shape.status
	}
	return hasField(r.New(), "Status")
}

// SpecChanged reports whether the spec of obj differs from that of old.
func SpecChanged(obj, old runtime.Object) bool {
	a, b := structField(obj, "Spec"), structField(old, "Spec")
	if !a.IsValid() || !b.IsValid() {
		return false
	}
	return !equality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// CopyStatus sets the status of dst to that of src (same kind).
func CopyStatus(dst, src runtime.Object) {
	d, s := structField(dst, "Status"), structField(src, "Status")
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// CopySpec sets the spec of dst to that of src (same kind).
func CopySpec(dst, src runtime.Object) {
	d, s := structField(dst, "Spec"), structField(src, "Spec")
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// ClearStatus resets the status of obj to its zero value.
func ClearStatus(obj runtime.Object) {
	f := structField(obj, "Status")
	if f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

func hasField(obj runtime.Object, name string) bool { return structField(obj, name).IsValid() }

func structField(obj runtime.Object, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// Table is the set of served resources with look-ups by URL segment and kind. The
// built-in resources are fixed when it is made; the resources of a custom resource
// definition are added and removed while the server serves (SetOwned, RemoveOwned).
// Readers see one consistent snapshot per call, without locking.
type Table struct {
	mu   sync.Mutex // serialises writers
	snap atomic.Pointer[tableSnapshot]
	// builtin are the resources given to NewTable; owned those of each owner.
	builtin []*Resource
	owned   map[string][]*Resource
}

// tableSnapshot is one immutable state of a Table.
type tableSnapshot struct {
	all    []*Resource
	byPath map[string]*Resource // "group/version/plural"
	byGVK  map[schema.GroupVersionKind]*Resource
}

// NewTable indexes resources.
func NewTable(resources []*Resource) *Table {
	for _, r := range resources {
		if r.shape == nil && r.New != nil {
			obj := r.New()
			r.shape = &shape{spec: hasField(obj, "Spec"), status: hasField(obj, "Status")}
		}
	}
	t := &Table{builtin: resources, owned: map[string][]*Resource{}}
	t.rebuild()
	return t
}

// rebuild makes a new snapshot from the built-in and owned resources (t.mu held, or
// t not yet shared). Owned resources come after the built-in ones, by owner name; a
// resource whose path or kind is already served is left out.
func (t *Table) rebuild() {
	snap := &tableSnapshot{byPath: map[string]*Resource{}, byGVK: map[schema.GroupVersionKind]*Resource{}}
	add := func(r *Resource) {
		path := r.GroupVersion.String() + "/" + r.Plural
		if _, dup := snap.byPath[path]; dup {
			return
		}
		if _, dup := snap.byGVK[r.GroupVersionKind()]; dup {
			return
		}
		snap.all = append(snap.all, r)
		snap.byPath[path] = r
		snap.byGVK[r.GroupVersionKind()] = r
	}
	for _, r := range t.builtin {
		add(r)
	}
	owners := make([]string, 0, len(t.owned))
	for o := range t.owned {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		for _, r := range t.owned[o] {
			add(r)
		}
	}
	t.snap.Store(snap)
}

// SetOwned replaces the resources an owner (a custom resource definition's name)
// serves. It returns the resources it replaced.
func (t *Table) SetOwned(owner string, resources []*Resource) (replaced []*Resource) {
	t.mu.Lock()
	defer t.mu.Unlock()
	replaced = t.owned[owner]
	t.owned[owner] = resources
	t.rebuild()
	return replaced
}

// RemoveOwned stops serving an owner's resources and returns them.
func (t *Table) RemoveOwned(owner string) (removed []*Resource) {
	t.mu.Lock()
	defer t.mu.Unlock()
	removed, ok := t.owned[owner]
	if !ok {
		return nil
	}
	delete(t.owned, owner)
	t.rebuild()
	return removed
}

// Owned returns the resources an owner serves.
func (t *Table) Owned(owner string) []*Resource {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owned[owner]
}

// All returns the resources in their declared order, custom ones last. The slice
// must not be modified.
func (t *Table) All() []*Resource { return t.snap.Load().all }

// Lookup finds the resource served at group/version/plural.
func (t *Table) Lookup(gv schema.GroupVersion, plural string) (*Resource, bool) {
	r, ok := t.snap.Load().byPath[gv.String()+"/"+strings.ToLower(plural)]
	return r, ok
}

// ForKind finds the resource for a kind.
func (t *Table) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	r, ok := t.snap.Load().byGVK[gvk]
	return r, ok
}

// GroupVersions returns the served group-versions in declared order, core first.
func (t *Table) GroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, r := range t.All() {
		if !seen[r.GroupVersion] {
			seen[r.GroupVersion] = true
			out = append(out, r.GroupVersion)
		}
	}
	return out
}
