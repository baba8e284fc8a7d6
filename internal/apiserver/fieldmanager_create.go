package apiserver

import (
	"bytes"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kubette/kubette/internal/registry"
)

// createFields computes the managedFields of a create without the general field
// manager's pipeline. On a create the live object is an empty one of the kind and the
// request carries no managedFields, so the upstream pipeline (convert both objects to
// the served version by copying them, compare them, strip the metadata fields, record
// the manager's identity as JSON and decode it again) reduces to: compare the empty
// object, typed once per kind and kept, with the new one; the manager owns what was
// added or modified, less the metadata fields upstream strips. The entry is the one
// upstream writes, byte for byte (TestCreateFieldsSameAsFieldManager).
type createFields struct {
	empty  *typed.TypedValue
	goType reflect.Type
	rt     resolvedType
	// shapes keeps the entries of objects whose fields are all scalars (shapeCache).
	shapes *shapeCache
}

// newStripSet returns the fields upstream's field manager never records as managed.
func newStripSet() *fieldpath.Set {
	return fieldpath.NewSet(
		fieldpath.MakePathOrDie("apiVersion"),
		fieldpath.MakePathOrDie("kind"),
		fieldpath.MakePathOrDie("metadata"),
		fieldpath.MakePathOrDie("metadata", "name"),
		fieldpath.MakePathOrDie("metadata", "namespace"),
		fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
		fieldpath.MakePathOrDie("metadata", "selfLink"),
		fieldpath.MakePathOrDie("metadata", "uid"),
		fieldpath.MakePathOrDie("metadata", "clusterName"),
		fieldpath.MakePathOrDie("metadata", "generation"),
		fieldpath.MakePathOrDie("metadata", "managedFields"),
		fieldpath.MakePathOrDie("metadata", "resourceVersion"),
	)
}

// createType returns the kept empty typed value of r's kind, made on first use.
func (f *fieldManagers) createType(r *registry.Resource) (*createFields, error) {
	<-f.ready
	gvk := r.GroupVersionKind()
	f.cmu.RLock()
	c, ok := f.creates[gvk]
	f.cmu.RUnlock()
	if ok {
		return c, nil
	}
	tc, ok := f.converter.(*typeConverter)
	if !ok {
		return nil, fmt.Errorf("create fields of %s: no resolving type converter", gvk)
	}
	rt, ok := tc.resolve(gvk)
	if !ok {
		return nil, fmt.Errorf("create fields of %s: kind has no schema", gvk)
	}
	empty := r.New()
	setServedTypeMeta(r, empty)
	v, err := value.NewValueReflect(empty)
	if err != nil {
		return nil, fmt.Errorf("create fields of %s: %w", gvk, err)
	}
	c = &createFields{empty: typed.AsTypedUnvalidated(v, rt.schema, rt.ref), goType: reflect.TypeOf(empty), rt: rt,
		shapes: newShapeCache(reflect.TypeOf(empty))}
	f.cmu.Lock()
	f.creates[gvk] = c
	f.cmu.Unlock()
	return c, nil
}

// createManaged sets obj's managedFields as the field manager does on a create by
// manager. It reports false, leaving obj untouched, where it does not apply (the
// request carries managedFields, the object is not the kind's Go type, the manager's
// name is not valid UTF-8) or the comparison fails: the caller then takes the general
// path.
func (f *fieldManagers) createManaged(r *registry.Resource, obj runtime.Object, manager string) bool {
	if !utf8.ValidString(manager) {
		return false
	}
	c, err := f.createType(r)
	if err != nil || reflect.TypeOf(obj) != c.goType {
		return false
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetManagedFields() != nil {
		return false
	}
	gvk := r.GroupVersionKind()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	shape, shaped := c.shapes.key(obj)
	entry, known := shapeEntry{}, false
	if shaped {
		entry, known = c.shapes.get(shape)
	}
	if !known {
		if entry, err = f.compareCreate(c, obj); err != nil {
			return false
		}
		if shaped {
			c.shapes.put(shape, entry)
		}
	}
	if entry.empty {
		return true
	}
	if manager == "" {
		manager = "unknown"
	}
	m.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: gvk.GroupVersion().String(),
		Time:       &metav1.Time{Time: time.Now().UTC()},
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: bytes.Clone(entry.raw)},
	}})
	return true
}

// compareCreate computes the managed fields of creating obj: what differs from the
// kind's empty object, less the fields never recorded.
func (f *fieldManagers) compareCreate(c *createFields, obj runtime.Object) (shapeEntry, error) {
	v, err := value.NewValueReflect(obj)
	if err != nil {
		return shapeEntry{}, fmt.Errorf("create fields: %w", err)
	}
	cmp, err := c.empty.Compare(typed.AsTypedUnvalidated(v, c.rt.schema, c.rt.ref))
	if err != nil {
		return shapeEntry{}, fmt.Errorf("create fields: %w", err)
	}
	set := cmp.Modified.Union(cmp.Added).Difference(f.strip)
	if set.Empty() {
		return shapeEntry{empty: true}, nil
	}
	raw, err := set.ToJSON()
	if err != nil {
		return shapeEntry{}, fmt.Errorf("create fields: %w", err)
	}
	return shapeEntry{raw: raw}, nil
}
