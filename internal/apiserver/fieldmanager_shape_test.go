package apiserver

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/kubette/kubette/internal/registry"
)

// TestCreateFieldsShapes checks the shapes kept by the create path: randomly filled
// Events of both groups without maps or slices (every one has a shape) get exactly the
// general field manager's entry, whether their shape was seen before or not; objects
// with a label or an owner reference have no shape.
func TestCreateFieldsShapes(t *testing.T) {
	f := testFieldManagers(t)
	table := registry.NewTable(registry.Builtin())
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	fill := randfill.NewWithSeed(seed).NilChance(0.5).MaxDepth(6).Funcs(
		func(tm *metav1.Time, c randfill.Continue) {
			if c.Bool() {
				*tm = metav1.NewTime(time.Unix(c.Int63n(2e9), 0))
			}
		},
		func(tm *metav1.MicroTime, c randfill.Continue) {
			if c.Bool() {
				*tm = metav1.NewMicroTime(time.Unix(c.Int63n(2e9), c.Int63n(1e9)))
			}
		},
		func(s *string, c randfill.Continue) {
			if c.Bool() {
				*s = fmt.Sprintf("s%d", c.Intn(1000))
			}
		},
		func(n *int32, c randfill.Continue) {
			if c.Bool() {
				*n = c.Int31n(3)
			}
		},
	)
	rng := rand.New(rand.NewSource(seed))
	for _, gvk := range []string{"events.k8s.io/v1/Event", "v1/Event"} {
		var r *registry.Resource
		for _, c := range table.All() {
			if c.GroupVersionKind().GroupVersion().String()+"/"+c.Kind == gvk {
				r = c
			}
		}
		if r == nil {
			t.Fatalf("no resource %s", gvk)
		}
		shapes := map[string]bool{}
		for i := range 300 {
			obj := r.New()
			fill.Fill(obj)
			m, _ := meta.Accessor(obj)
			m.SetLabels(nil)
			m.SetAnnotations(nil)
			m.SetOwnerReferences(nil)
			m.SetFinalizers(nil)
			m.SetManagedFields(nil)
			setServedTypeMeta(r, obj)
			c, err := f.createType(r)
			if err != nil {
				t.Fatal(err)
			}
			key, ok := c.shapes.key(obj)
			if !ok {
				t.Fatalf("%s %d: no shape", gvk, i)
			}
			shapes[key] = true
			// The same shape with other values: its entry is the one just kept.
			other := obj.DeepCopyObject()
			revalue(reflect.ValueOf(other).Elem(), rng)
			if k, ok := c.shapes.key(other); !ok || k != key {
				t.Fatalf("%s %d: other values, other shape", gvk, i)
			}
			for _, o := range []runtime.Object{obj, other} {
				if !sameCreate(t, f, r, o, "kube-scheduler") {
					t.Fatalf("%s %d: fast path not applied", gvk, i)
				}
			}
			if _, kept := c.shapes.get(key); !kept && len(c.shapes.sets) < maxShapes {
				t.Fatalf("%s %d: shape not kept", gvk, i)
			}
		}
		c, _ := f.createType(r)
		t.Logf("%s: 600 creates, %d shapes, %d kept", gvk, len(shapes), len(c.shapes.sets))
	}

	objs := benchCreateObjects()
	for name, obj := range map[string]runtime.Object{"v1/Pod": objs["v1/Pod"], "labelled Event": labelled(objs["events.k8s.io/v1/Event"])} {
		c := newShapeCache(reflect.TypeOf(obj))
		if _, ok := c.key(obj); ok {
			t.Errorf("%s: has a shape", name)
		}
	}
}

// revalue gives every non-zero string, integer and time in v another non-zero value.
func revalue(v reflect.Value, rng *rand.Rand) {
	switch v.Kind() {
	case reflect.String:
		if v.String() != "" && v.CanSet() {
			v.SetString(fmt.Sprintf("other%d", rng.Intn(1000)))
		}
	case reflect.Int32, reflect.Int64:
		if v.Int() != 0 && v.CanSet() {
			v.SetInt(1 + rng.Int63n(100))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			revalue(v.Elem(), rng)
		}
	case reflect.Struct:
		switch t := v.Addr().Interface().(type) {
		case *metav1.Time:
			if !t.IsZero() {
				*t = metav1.NewTime(time.Unix(1+rng.Int63n(2e9), 0))
			}
			return
		case *metav1.MicroTime:
			if !t.IsZero() {
				*t = metav1.NewMicroTime(time.Unix(1+rng.Int63n(2e9), rng.Int63n(1e9)))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				revalue(v.Field(i), rng)
			}
		}
	}
}

func labelled(obj runtime.Object) runtime.Object {
	out := obj.DeepCopyObject()
	m, _ := meta.Accessor(out)
	m.SetLabels(map[string]string{"a": "b"})
	return out
}
