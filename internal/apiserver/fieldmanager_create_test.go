package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/randfill"

	"github.com/kubette/kubette/internal/registry"
)

// testFieldManagers returns field managers over the built-in scheme, ready at once.
func testFieldManagers(tb testing.TB) *fieldManagers {
	tb.Helper()
	scheme, err := registry.NewScheme()
	if err != nil {
		tb.Fatal(err)
	}
	f := &fieldManagers{scheme: scheme, converter: newTypeConverter(applyconfigurations.NewTypeConverter(scheme), scheme),
		ready: make(chan struct{}), managers: map[string]*managedfields.FieldManager{}, log: func(string, ...any) {},
		creates: map[schema.GroupVersionKind]*createFields{}, strip: newStripSet()}
	close(f.ready)
	return f
}

// benchCreateObjects are a scheduler's Scheduled Event and a ReplicaSet's pod as created.
func benchCreateObjects() map[string]runtime.Object {
	now := time.Unix(1700000000, 0)
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "p.1", Namespace: "default", UID: "u", CreationTimestamp: metav1.NewTime(now)},
		EventTime: metav1.NewMicroTime(now), Reason: "Scheduled", Note: "Successfully assigned default/p to n",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", UID: "u2", APIVersion: "v1", ResourceVersion: "12"},
		Action:    "Binding", ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-h", Type: "Normal"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u", CreationTimestamp: metav1.NewTime(now), Labels: map[string]string{"app": "bench"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u1", Controller: new(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile, Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{}, EnableServiceLinks: new(true)},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}}
	coreEv := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "p.2", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"},
		Reason: "Pulled", Message: "m", Source: corev1.EventSource{Component: "kubelet", Host: "n"}, FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now), Count: 1, Type: "Normal"}
	return map[string]runtime.Object{"events.k8s.io/v1/Event": ev, "v1/Pod": pod, "v1/Event": coreEv,
		// As bench/apiserver creates them.
		"v1/ConfigMap": &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"bench.kubette.io/run": "r1"}},
			Data: map[string]string{"payload": "xxxx"}}}
}

// generalCreate is the managedFields of a create through the general field manager.
func generalCreate(tb testing.TB, f *fieldManagers, r *registry.Resource, obj runtime.Object, manager string) runtime.Object {
	tb.Helper()
	m, err := f.get(r, "")
	if err != nil {
		tb.Fatal(err)
	}
	live := r.New()
	setServedTypeMeta(r, live)
	return m.UpdateNoErrors(live, obj, manager)
}

// sameCreate checks that the create fast path and the general field manager give obj
// the same managedFields and otherwise the same object, and reports whether the fast
// path applied.
func sameCreate(t *testing.T, f *fieldManagers, r *registry.Resource, obj runtime.Object, manager string) bool {
	t.Helper()
	slow := generalCreate(t, f, r, obj.DeepCopyObject(), manager)
	fast := obj.DeepCopyObject()
	applied := f.createManaged(r, fast, manager)
	if !applied {
		fast = generalCreate(t, f, r, fast, manager)
	}
	setServedTypeMeta(r, slow)
	setServedTypeMeta(r, fast)
	sj, fj := encodeNoTimes(t, slow), encodeNoTimes(t, fast)
	if !bytes.Equal(sj, fj) {
		t.Fatalf("%s by %q: fast path (applied %v)\n%s\ngeneral path\n%s", r.GroupVersionKind(), manager, applied, fj, sj)
	}
	return applied
}

// encodeNoTimes is obj's JSON with each managedFields time checked (UTC, within a
// minute of now) and replaced by a fixed one.
func encodeNoTimes(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	mf := m.GetManagedFields()
	for i := range mf {
		if mf[i].Time == nil {
			continue
		}
		if time.Since(mf[i].Time.Time).Abs() > time.Minute || mf[i].Time.Location() != time.UTC {
			t.Fatalf("managedFields[%d] time %v", i, mf[i].Time)
		}
		mf[i].Time = &metav1.Time{Time: time.Unix(1, 0)}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCreateFieldsSameAsFieldManager checks that the create fast path records exactly
// what the general field manager records: over hand-written Events and Pods, over
// randomly filled objects of every built-in kind, with managers whose names are empty
// or not UTF-8, and objects that bring their own managedFields (the general path).
func TestCreateFieldsSameAsFieldManager(t *testing.T) {
	f := testFieldManagers(t)
	table := registry.NewTable(registry.Builtin())
	byGVK := map[string]*registry.Resource{}
	for _, r := range table.All() {
		byGVK[r.GroupVersionKind().GroupVersion().String()+"/"+r.Kind] = r
	}
	for name, obj := range benchCreateObjects() {
		r := byGVK[name]
		if r == nil {
			t.Fatalf("no resource %s", name)
		}
		for _, manager := range []string{"kube-scheduler", "", "kubectl-client-side-apply", "bad\xffname"} {
			applied := sameCreate(t, f, r, obj, manager)
			if applied != (manager != "bad\xffname") {
				t.Errorf("%s by %q: fast path applied %v", name, manager, applied)
			}
		}
		own := obj.DeepCopyObject()
		m, _ := meta.Accessor(own)
		m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "x", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}})
		if sameCreate(t, f, r, own, "m") {
			t.Errorf("%s with managedFields: fast path applied", name)
		}
		m.SetManagedFields([]metav1.ManagedFieldsEntry{})
		if sameCreate(t, f, r, own, "m") {
			t.Errorf("%s with reset managedFields: fast path applied", name)
		}
	}

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	fill := randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 2).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = resource.MustParse(fmt.Sprintf("%dm", c.Intn(100000)))
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(c.Int31n(1000))
			} else {
				*v = intstr.FromString(fmt.Sprintf("p%d", c.Intn(3)))
			}
		},
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
		func(e *runtime.RawExtension, c randfill.Continue) {
			if c.Bool() {
				e.Raw = []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"%d"}}`, c.Intn(9)))
			}
		},
		func(j *apiextensionsv1.JSON, c randfill.Continue) { // a CRD schema's defaults and examples
			if c.Bool() {
				j.Raw = []byte(fmt.Sprintf(`{"k":%d}`, c.Intn(9)))
			}
		},
		func(e *metav1.ManagedFieldsEntry, c randfill.Continue) { // in templates' metadata
			*e = metav1.ManagedFieldsEntry{Manager: "x", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}
		},
		func(s *string, c randfill.Continue) {
			*s = fmt.Sprintf("s%d", c.Intn(4)) // few values: duplicates in lists and maps
		},
	)
	rng := rand.New(rand.NewSource(seed))
	fast, total := 0, 0
	for _, r := range table.All() {
		if r.Virtual {
			continue
		}
		for i := range 30 {
			obj := r.New()
			if i > 0 {
				fill.Fill(obj)
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				t.Fatal(err)
			}
			m.SetManagedFields(nil)
			if rng.Intn(4) == 0 {
				obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
			}
			total++
			if sameCreate(t, f, r, obj, fmt.Sprintf("m%d", i%3)) {
				fast++
			}
		}
	}
	t.Logf("%d of %d random creates took the fast path", fast, total)
	if fast < total*9/10 {
		t.Errorf("fast path applied to %d of %d random creates", fast, total)
	}
}

// BenchmarkFieldManagerCreate measures the managedFields entry of a create, through
// the general field manager and the create path.
func BenchmarkFieldManagerCreate(b *testing.B) {
	f := testFieldManagers(b)
	table := registry.NewTable(registry.Builtin())
	for name, obj := range benchCreateObjects() {
		var r *registry.Resource
		for _, c := range table.All() {
			if c.GroupVersionKind().GroupVersion().String()+"/"+c.Kind == name {
				r = c
			}
		}
		for _, path := range []string{"general", "create"} {
			b.Run(name+"/"+path, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					o := obj.DeepCopyObject()
					if path == "general" {
						generalCreate(b, f, r, o, "kube-scheduler")
					} else if !f.createManaged(r, o, "kube-scheduler") {
						b.Fatal("create path did not apply")
					}
				}
			})
		}
	}
}
