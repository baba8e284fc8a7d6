package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/registry"
)

// referenceWatchFrame is how a watch event was framed before serialisations were
// shared: the object encoded, then the whole event through json.Encoder or
// metav1.WatchEvent.Marshal.
func referenceWatchFrame(t *testing.T, c *codecs, typ, eventType string, obj runtime.Object) []byte {
	t.Helper()
	var out bytes.Buffer
	if typ == "protobuf" {
		var inner bytes.Buffer
		if err := c.proto.Encode(obj, &inner); err != nil {
			t.Fatal(err)
		}
		data, err := (&metav1.WatchEvent{Type: eventType, Object: runtime.RawExtension{Raw: inner.Bytes()}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(data)))
		out.Write(hdr[:])
		out.Write(data)
		return out.Bytes()
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(&out).Encode(struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}{eventType, raw}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestWatchFramesUnchanged checks that events framed around a shared serialisation
// are byte for byte what the watch wrote before.
func TestWatchFramesUnchanged(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := newCodecs(scheme)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a<b>&c", Namespace: "ns", ResourceVersion: "42",
		Annotations: map[string]string{"x": "<script>&amp;\u2028é"}}, Data: map[string]string{"k": "v\n\"q\""}}
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	st := errorToStatus(errTest)
	for _, typ := range []string{"json", "protobuf"} {
		for _, obj := range []runtime.Object{cm, st} {
			for _, et := range []string{"ADDED", "MODIFIED", "DELETED", "ERROR"} {
				var got bytes.Buffer
				enc := &watchEncoder{typ: typ, w: &got, codec: c}
				raw, err := enc.encodeObject(obj)
				if err != nil {
					t.Fatal(err)
				}
				if err := enc.writeRaw(et, raw); err != nil {
					t.Fatal(err)
				}
				if err := enc.write(et, obj); err != nil {
					t.Fatal(err)
				}
				want := referenceWatchFrame(t, c, typ, et, obj)
				if !bytes.Equal(got.Bytes(), append(append([]byte{}, want...), want...)) {
					t.Fatalf("%s %s frame:\n got %q\nwant %q (twice)", typ, et, got.Bytes(), want)
				}
			}
		}
	}
}

var errTest = &json.UnsupportedValueError{Str: "test <error>"}
