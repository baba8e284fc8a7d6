package apiserver

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// A create's managed fields are the fields in which the new object differs from the
// kind's empty object (createFields). For an object without slices or interface
// values, and whose only maps map strings to strings — an Event as the scheduler and
// the kubelet record it, a ConfigMap or a Lease with their labels and annotations —
// that set depends only on which scalars are zero, which pointers and maps are nil and
// which keys the maps hold: the values of non-zero scalars and of map entries never
// appear in field paths (only map keys and list keys would), and every non-zero scalar
// differs from the empty object's zero. shapes keeps, per kind, the entry computed for
// each such pattern (its shape: the map keys written out), so that the comparison runs
// once per shape instead of once per create.

// maxShapes caps the shapes kept per kind: more than this many patterns of one kind
// are computed each time.
const maxShapes = 256

// maxShapeKeyBytes caps the length of one shape (a map's keys are written into it): an
// object with more map keys than that is compared each time.
const maxShapeKeyBytes = 2048

// shapeCache holds one kind's computed entries by shape.
type shapeCache struct {
	plan *shapeNode
	mu   sync.RWMutex
	sets map[string]shapeEntry
}

// shapeEntry is the managedFields entry's FieldsV1 of one shape; empty means that
// the create manages no field (no entry is written).
type shapeEntry struct {
	raw   []byte
	empty bool
}

// shapeKind says how one Go type takes part in a shape.
type shapeKind int

const (
	// shapeScalar is a string, number or bool: zero or not.
	shapeScalar shapeKind = iota
	// shapeTime is a metav1.Time or MicroTime: zero (null) or not.
	shapeTime
	// shapeStruct is a plain struct: the shapes of its exported fields.
	shapeStruct
	// shapePointer is nil or the shape of what it points to.
	shapePointer
	// shapeNilOnly is a map, slice or interface: the shape exists only while it is nil.
	shapeNilOnly
	// shapeStringMap is a map of strings to strings: nil or not, then its keys in order
	// with whether each value is empty.
	shapeStringMap
	// shapeOpaque is a type with its own serialisation (a json.Marshaler or an
	// unstructured converter other than the times): it has no shape.
	shapeOpaque
)

// shapeNode is the plan of one Go type.
type shapeNode struct {
	kind   shapeKind
	fields []int // shapeStruct: indexes of the exported fields
	elems  []*shapeNode
}

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
)

// newShapePlan returns the plan of t, its struct and pointer types planned once
// (recursive types point back to their node).
func newShapePlan(t reflect.Type, seen map[reflect.Type]*shapeNode) *shapeNode {
	if n, ok := seen[t]; ok {
		return n
	}
	n := &shapeNode{}
	seen[t] = n
	switch {
	case t == timeType || t == microTimeType:
		n.kind = shapeTime
		return n
	case t.Kind() == reflect.Pointer:
		n.kind = shapePointer
		n.elems = []*shapeNode{newShapePlan(t.Elem(), seen)}
		return n
	case t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()),
		t.Implements(reflect.TypeFor[value.UnstructuredConverter]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[value.UnstructuredConverter]()):
		n.kind = shapeOpaque
		return n
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		n.kind = shapeScalar
	case reflect.Map:
		n.kind = shapeNilOnly
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String &&
			newShapePlan(t.Key(), seen).kind == shapeScalar && newShapePlan(t.Elem(), seen).kind == shapeScalar {
			n.kind = shapeStringMap
		}
	case reflect.Slice, reflect.Interface:
		n.kind = shapeNilOnly
	case reflect.Struct:
		n.kind = shapeStruct
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				if f.Tag.Get("json") == "-" {
					continue
				}
				n.kind = shapeOpaque // its serialisation may depend on what the shape cannot see
				n.fields, n.elems = nil, nil
				return n
			}
			n.fields = append(n.fields, i)
			n.elems = append(n.elems, newShapePlan(f.Type, seen))
		}
	default:
		n.kind = shapeOpaque
	}
	return n
}

// appendShape appends v's shape to key: one byte per zero test and nil test, in the
// plan's order. It reports false when v has no shape (a non-nil map, slice or
// interface, or an opaque type).
func (n *shapeNode) appendShape(key []byte, v reflect.Value) ([]byte, bool) {
	switch n.kind {
	case shapeScalar:
		return append(key, zeroByte(v.IsZero())), true
	case shapeTime:
		switch t := v.Interface().(type) {
		case metav1.Time:
			return append(key, zeroByte(t.IsZero())), true
		case metav1.MicroTime:
			return append(key, zeroByte(t.IsZero())), true
		}
		return key, false
	case shapePointer:
		if v.IsNil() {
			return append(key, 0), true
		}
		return n.elems[0].appendShape(append(key, 1), v.Elem())
	case shapeNilOnly:
		return key, v.IsNil()
	case shapeStringMap:
		return appendStringMapShape(key, v)
	case shapeStruct:
		ok := true
		for i, fi := range n.fields {
			if key, ok = n.elems[i].appendShape(key, v.Field(fi)); !ok {
				return key, false
			}
		}
		return key, true
	}
	return key, false
}

// appendStringMapShape appends the shape of v, a map of strings to strings: 0 when it
// is nil, else 1, the number of keys and each key (sorted, length first) with a zero
// byte for its value. It reports false when the shape would pass maxShapeKeyBytes.
func appendStringMapShape(key []byte, v reflect.Value) ([]byte, bool) {
	if v.IsNil() {
		return append(key, 0), true
	}
	type entry struct {
		k    string
		zero bool
	}
	entries := make([]entry, 0, v.Len())
	size := len(key)
	it := v.MapRange()
	for it.Next() {
		k := it.Key().String()
		if size += len(k) + binary.MaxVarintLen64 + 1; size > maxShapeKeyBytes {
			return key, false
		}
		entries = append(entries, entry{k, it.Value().Len() == 0})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.k, b.k) })
	key = binary.AppendUvarint(append(key, 1), uint64(len(entries)))
	for _, e := range entries {
		key = append(binary.AppendUvarint(key, uint64(len(e.k))), e.k...)
		key = append(key, zeroByte(e.zero))
	}
	return key, true
}

func zeroByte(zero bool) byte {
	if zero {
		return 0
	}
	return 1
}

// newShapeCache plans the shapes of objects of Go type t (a pointer to a struct).
func newShapeCache(t reflect.Type) *shapeCache {
	return &shapeCache{plan: newShapePlan(t, map[reflect.Type]*shapeNode{}), sets: map[string]shapeEntry{}}
}

// key returns obj's shape (obj is a pointer of the planned type), or false.
func (c *shapeCache) key(obj any) (string, bool) {
	key, ok := c.plan.appendShape(make([]byte, 0, 128), reflect.ValueOf(obj))
	if !ok {
		return "", false
	}
	return string(key), true
}

// get returns the entry computed for key.
func (c *shapeCache) get(key string) (shapeEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.sets[key]
	return e, ok
}

// put keeps the entry of key, up to maxShapes entries.
func (c *shapeCache) put(key string, e shapeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sets) < maxShapes {
		c.sets[key] = e
	}
}
