package apiserver

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
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
	owned := objs["events.k8s.io/v1/Event"].DeepCopyObject()
	om, _ := meta.Accessor(owned)
	om.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}})
	for name, obj := range map[string]runtime.Object{"v1/Pod": objs["v1/Pod"], "owned Event": owned} {
		c := newShapeCache(reflect.TypeOf(obj))
		if _, ok := c.key(obj); ok {
			t.Errorf("%s: has a shape", name)
		}
	}
	c := newShapeCache(reflect.TypeOf(objs["events.k8s.io/v1/Event"]))
	if _, ok := c.key(labelled(objs["events.k8s.io/v1/Event"])); !ok {
		t.Error("labelled Event: no shape")
	}
}

// TestCreateFieldsStringMapShapes checks the shapes of objects whose maps map strings
// to strings (ConfigMaps, Leases, Events with labels and annotations): randomly filled
// maps of a few keys get exactly the general field manager's entry whether their shape
// was seen before or not; the same keys with other values are the same shape, other
// keys (or a nil map against an empty one) another; maps with more keys than a shape
// holds have none.
func TestCreateFieldsStringMapShapes(t *testing.T) {
	f := testFieldManagers(t)
	table := registry.NewTable(registry.Builtin())
	byGVK := map[string]*registry.Resource{}
	for _, r := range table.All() {
		byGVK[r.GroupVersionKind().GroupVersion().String()+"/"+r.Kind] = r
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	keys := []string{"a", "b", "app.kubernetes.io/name", "payload", "x.y/z", "k~1", ""}
	randMap := func() map[string]string {
		switch rng.Intn(5) {
		case 0:
			return nil
		case 1:
			return map[string]string{}
		}
		m := map[string]string{}
		for range 1 + rng.Intn(4) {
			v := ""
			if rng.Intn(3) > 0 {
				v = fmt.Sprintf("v%d", rng.Intn(100))
			}
			m[keys[rng.Intn(len(keys))]] = v
		}
		return m
	}
	revalueMap := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range m {
			if v != "" {
				v = fmt.Sprintf("other%d", rng.Intn(100))
			}
			out[k] = v
		}
		return out
	}
	cmRes, leaseRes, evRes := byGVK["v1/ConfigMap"], byGVK["coordination.k8s.io/v1/Lease"], byGVK["events.k8s.io/v1/Event"]
	if cmRes == nil || leaseRes == nil || evRes == nil {
		t.Fatal("missing resources")
	}
	for i := range 300 {
		var r *registry.Resource
		var obj, other runtime.Object
		labels, annotations := randMap(), randMap()
		meta1 := metav1.ObjectMeta{Name: fmt.Sprintf("o%d", i), Namespace: "default", Labels: labels, Annotations: annotations}
		meta2 := metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", Labels: revalueMap(labels), Annotations: revalueMap(annotations)}
		switch i % 3 {
		case 0:
			r = cmRes
			data := randMap()
			obj = &corev1.ConfigMap{ObjectMeta: meta1, Data: data}
			other = &corev1.ConfigMap{ObjectMeta: meta2, Data: revalueMap(data)}
		case 1:
			r = leaseRes
			holder := fmt.Sprintf("h%d", i)
			obj = &coordinationv1.Lease{ObjectMeta: meta1, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
			other = &coordinationv1.Lease{ObjectMeta: meta2, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
		default:
			r = evRes
			ev := benchCreateObjects()["events.k8s.io/v1/Event"].(*eventsv1.Event)
			ev.ObjectMeta = meta1
			o := ev.DeepCopy()
			o.ObjectMeta = meta2
			o.Note = "another note"
			obj, other = ev, o
		}
		setServedTypeMeta(r, obj)
		setServedTypeMeta(r, other)
		c, err := f.createType(r)
		if err != nil {
			t.Fatal(err)
		}
		key, ok := c.shapes.key(obj)
		if !ok {
			t.Fatalf("%s %d: no shape", r.Kind, i)
		}
		if k, ok := c.shapes.key(other); !ok || k != key {
			t.Fatalf("%s %d: the same keys with other values, another shape", r.Kind, i)
		}
		for _, o := range []runtime.Object{obj, other} {
			if !sameCreate(t, f, r, o, "kubectl-create") {
				t.Fatalf("%s %d: fast path not applied", r.Kind, i)
			}
		}
	}

	c := newShapeCache(reflect.TypeFor[*corev1.ConfigMap]())
	shape := func(cm *corev1.ConfigMap) string {
		k, ok := c.key(cm)
		if !ok {
			t.Fatalf("%v: no shape", cm.Data)
		}
		return k
	}
	distinct := []*corev1.ConfigMap{{}, {Data: map[string]string{}}, {Data: map[string]string{"a": "1"}}, {Data: map[string]string{"a": ""}},
		{Data: map[string]string{"b": "1"}}, {Data: map[string]string{"a": "1", "b": "1"}}, {Data: map[string]string{"ab": "1"}},
		{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}}}}
	seen := map[string]int{}
	for i, cm := range distinct {
		k := shape(cm)
		if j, dup := seen[k]; dup {
			t.Errorf("ConfigMaps %d and %d: one shape", j, i)
		}
		seen[k] = i
	}
	big := map[string]string{}
	for i := range maxShapeKeyBytes / 8 {
		big[fmt.Sprintf("key-%04d", i)] = "v"
	}
	if _, ok := c.key(&corev1.ConfigMap{Data: big}); ok {
		t.Errorf("a ConfigMap of %d keys has a shape", len(big))
	}
	cmr := byGVK["v1/ConfigMap"]
	bigCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"}, Data: big}
	setServedTypeMeta(cmr, bigCM)
	if !sameCreate(t, f, cmr, bigCM, "m") {
		t.Error("a ConfigMap without a shape did not take the create path")
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
