package apiserver

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/registry"
)

// TestBindPodLeavesStateAlone checks that bindPod, which shares the cached pod's
// memory, changes only its own copy of what the binding sets.
func TestBindPodLeavesStateAlone(t *testing.T) {
	table := registry.NewTable(registry.Builtin())
	r, ok := table.Lookup(corev1.SchemeGroupVersion, "pods")
	if !ok {
		t.Fatal("no pods resource")
	}
	cur := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u", Annotations: map[string]string{"a": "1"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}}
	before := cur.DeepCopy()
	now := metav1.NewTime(time.Unix(1700000000, 0))
	got, err := bindPod(cur, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"b": "2"}},
		Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, r, "p", now)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(cur, before) {
		t.Fatalf("the binding changed the stored state:\n%+v\nwas\n%+v", cur, before)
	}
	want := before.DeepCopy()
	want.Spec.NodeName = "n1"
	want.Annotations["b"] = "2"
	want.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("bound pod\n%+v\nwant\n%+v", got, want)
	}

	// No annotations in the binding: the pod keeps cur's (shared, unchanged) map; no
	// conditions yet: one is added.
	cur2 := before.DeepCopy()
	cur2.Status.Conditions = nil
	got, err = bindPod(cur2, &corev1.Binding{Target: corev1.ObjectReference{Name: "n2"}}, r, "p", now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "n2" || len(got.Status.Conditions) != 1 || len(cur2.Status.Conditions) != 0 || len(got.Annotations) != 1 {
		t.Fatalf("bound pod %+v, state %+v", got, cur2)
	}

	for name, c := range map[string]func(p *corev1.Pod){
		"assigned": func(p *corev1.Pod) { p.Spec.NodeName = "n0" },
		"deleting": func(p *corev1.Pod) { p.DeletionTimestamp = &now },
	} {
		p := before.DeepCopy()
		c(p)
		if _, err := bindPod(p, &corev1.Binding{Target: corev1.ObjectReference{Name: "n1"}}, r, "p", now); !apierrors.IsConflict(err) {
			t.Errorf("%s: %v, want a conflict", name, err)
		}
	}
	if _, err := bindPod(before.DeepCopy(), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{UID: "other"}, Target: corev1.ObjectReference{Name: "n1"}}, r, "p", now); !apierrors.IsConflict(err) {
		t.Errorf("other uid: %v, want a conflict", err)
	}
}

// TestReadBody checks bodies of a declared length, of an unknown one (chunked), and
// over the limit either way.
func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		length int64 // -1: unknown
		big    bool
		want   string
		code   int32
	}{
		{name: "declared", body: `{"a":1}`, length: 7, want: `{"a":1}`},
		{name: "empty", body: "", length: 0, want: ""},
		{name: "unknown length", body: `{"a":1}`, length: -1, want: `{"a":1}`},
		{name: "declared too large", length: maxBodyBytes + 1, big: true, code: 413},
		{name: "unknown length too large", length: -1, big: true, code: 413},
		{name: "shorter than declared", body: `{"a"`, length: 7, code: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.big {
				body = io.LimitReader(zeros{}, maxBodyBytes+1)
			}
			req := httptest.NewRequest("POST", "/api/v1/namespaces/default/configmaps", body)
			req.ContentLength = tc.length
			got, err := readBody(req)
			if tc.code != 0 {
				if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Code != tc.code {
					t.Fatalf("err %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
