package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/kubette/kubette/internal/registry"
)

// TestDecodeStoredSameAsSerializer checks decodeStored against the protobuf
// serializer's Decode over randomly filled objects of every stored kind, and that
// the decoded object shares no memory with the stored bytes.
func TestDecodeStoredSameAsSerializer(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := newCodecs(scheme)
	table := registry.NewTable(registry.Builtin())
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	fill := randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 2).MaxDepth(10).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = resource.MustParse(fmt.Sprintf("%dm", c.Intn(100000)))
		},
		func(v *intstr.IntOrString, c randfill.Continue) { *v = intstr.FromInt32(c.Int31n(1000)) },
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.NewTime(time.Unix(c.Int63n(2e9), 0)) },
		func(tm *metav1.MicroTime, c randfill.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(c.Int63n(2e9), c.Int63n(1e9)))
		},
		func(e *runtime.RawExtension, c randfill.Continue) {
			e.Raw = []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"%d"}}`, c.Intn(9)))
		},
		func(e *metav1.FieldsV1, c randfill.Continue) { e.Raw = []byte(`{"f:data":{}}`) },
	)
	n := 0
	for _, r := range table.All() {
		if r.Virtual {
			continue
		}
		for range 10 {
			obj := r.New()
			fill.Fill(obj)
			obj, _ = (&Server{}).toStorage(context.Background(), r, obj)
			obj.GetObjectKind().SetGroupVersionKind(r.StorageGVK())
			data, err := c.protoBytes(obj)
			if err != nil {
				t.Fatalf("%s: encode: %v", r.StorageGVK(), err)
			}
			want, _, err := c.proto.Decode(data, nil, nil)
			if err != nil {
				t.Fatalf("%s: serializer decode: %v", r.StorageGVK(), err)
			}
			got, err := decodeStored(scheme, data)
			if err != nil {
				t.Fatalf("%s: decodeStored: %v", r.StorageGVK(), err)
			}
			if !equality.Semantic.DeepEqual(got, want) || got.GetObjectKind().GroupVersionKind() != want.GetObjectKind().GroupVersionKind() {
				t.Fatalf("%s: decodeStored\n%+v\nserializer\n%+v", r.StorageGVK(), got, want)
			}
			// The stored bytes may be reused by their owner: the object must not change.
			clear(data)
			if !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("%s: the decoded object shares memory with the stored bytes", r.StorageGVK())
			}
			n++
		}
	}
	t.Logf("%d objects", n)

	cm, _ := c.protoBytes(func() runtime.Object {
		o := table.All()[0].New()
		o.GetObjectKind().SetGroupVersionKind(table.All()[0].StorageGVK())
		m, _ := meta.Accessor(o)
		m.SetName("x")
		return o
	}())
	for name, bad := range map[string][]byte{
		"empty":       nil,
		"prefix only": protoPrefix[:],
		"json":        []byte(`{"kind":"ConfigMap"}`),
		"truncated":   cm[:len(cm)-3],
		"unknown kind": append(append([]byte{}, protoPrefix[:]...),
			0x0a, 0x0b, 0x0a, 0x02, 'v', '1', 0x12, 0x05, 'N', 'o', 'p', 'e', 's'),
	} {
		if _, err := decodeStored(scheme, bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if !bytes.HasPrefix(cm, protoPrefix[:]) {
		t.Errorf("encoded object without the prefix: %q", cm)
	}
}

// BenchmarkDecodeStored measures the decode of a stored pod by the protobuf serializer
// and by decodeStored.
func BenchmarkDecodeStored(b *testing.B) {
	scheme, err := registry.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	c := newCodecs(scheme)
	pod := benchCreateObjects()["v1/Pod"]
	pod.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	data, err := c.protoBytes(pod)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("serializer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := c.proto.Decode(data, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeStored", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeStored(scheme, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
