package apiserver_test

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/kubette/kubette/internal/testenv"
)

// TestEventsV1FieldSelectors follows the Events API conformance test: events.k8s.io/v1
// selects by its own field names (reportingController, regarding.*), mapped onto the stored
// core Event, whose own names (source, involvedObject.*) keep working on core/v1; each API
// refuses the other's names.
func TestEventsV1FieldSelectors(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	v1 := env.Client.EventsV1().Events("default")
	core := env.Client.CoreV1().Events("default")
	for _, c := range []struct{ name, controller, regarding string }{{"a", "test-controller", "pod-a"}, {"b", "other-controller", "pod-b"}} {
		if _, err := v1.Create(ctx, &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: c.name},
			EventTime:           metav1.NewMicroTime(time.Now()),
			ReportingController: c.controller, ReportingInstance: c.controller + "-1", Action: "Test", Reason: "Testing", Type: "Normal",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: c.regarding},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(items []string) string {
		out := ""
		for _, n := range items {
			out += n + ","
		}
		return out
	}
	for sel, want := range map[string]string{
		"reportingController=test-controller":           "a,",
		"regarding.name=pod-b":                          "b,",
		"regarding.kind=Pod,type=Normal,reason=Testing": "a,b,",
		"metadata.name=b":                               "b,",
		"reportingController!=test-controller":          "b,",
	} {
		list, err := v1.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Errorf("events.k8s.io/v1 %s: %v", sel, err)
			continue
		}
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Name)
		}
		if names(got) != want {
			t.Errorf("events.k8s.io/v1 %s: %v, want %s", sel, got, want)
		}
	}
	for sel, want := range map[string]string{"source=test-controller": "a,", "reportingComponent=other-controller": "b,", "involvedObject.name=pod-a": "a,"} {
		list, err := core.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Errorf("core/v1 %s: %v", sel, err)
			continue
		}
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Name)
		}
		if names(got) != want {
			t.Errorf("core/v1 %s: %v, want %s", sel, got, want)
		}
	}
	refused := []struct {
		api, label string
		list       func(sel string) error
	}{
		{"events.k8s.io/v1", "involvedObject.name", func(sel string) error {
			_, err := v1.List(ctx, metav1.ListOptions{FieldSelector: sel})
			return err
		}},
		{"core/v1", "reportingController", func(sel string) error {
			_, err := core.List(ctx, metav1.ListOptions{FieldSelector: sel})
			return err
		}},
	}
	for _, c := range refused {
		err := c.list(c.label + "=x")
		if !apierrors.IsBadRequest(err) || err.Error() != "field label not supported: "+c.label {
			t.Errorf("%s %s: %v, want BadRequest field label not supported", c.api, c.label, err)
		}
	}
}

// TestEventsV1Lifecycle follows the rest of the Events API conformance test: a strategic
// merge patch adding a series, then an update of it, each read back equal to what was sent.
func TestEventsV1Lifecycle(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := t.Context()
	client := env.Client.EventsV1().Events("default")
	someTime := metav1.MicroTime{Time: time.Unix(1505828956, 0)}
	if _, err := client.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "event-test", Labels: map[string]string{"testevent-constant": "true"}},
		Regarding:  corev1.ObjectReference{Namespace: "default"}, EventTime: someTime,
		Note: "This is event-test", Action: "Do", Reason: "Test", Type: "Normal",
		ReportingController: "test-controller", ReportingInstance: "test-node",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testEvent, err := client.Get(ctx, "event-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldData, _ := json.Marshal(testEvent)
	newEvent := testEvent.DeepCopy()
	series := &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.MicroTime{Time: time.Unix(1505828951, 0)}}
	newEvent.Series = series
	newData, _ := json.Marshal(newEvent)
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, eventsv1.Event{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Patch(ctx, "event-test", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch: %v", err)
	}
	got, err := client.Get(ctx, "event-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.ResourceVersion, testEvent.ResourceVersion, got.ManagedFields, testEvent.ManagedFields = "", "", nil, nil
	testEvent.Series = series
	if !apiequality.Semantic.DeepEqual(testEvent, got) {
		t.Fatalf("patched event differs:\n got %#v\nwant %#v", got, testEvent)
	}
	testEvent.Series = &eventsv1.EventSeries{Count: 100, LastObservedTime: metav1.MicroTime{Time: time.Unix(1505828956, 0)}}
	if _, err := client.Update(ctx, testEvent, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	got, err = client.Get(ctx, "event-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.ResourceVersion, got.ManagedFields = "", nil
	if !apiequality.Semantic.DeepEqual(testEvent, got) {
		t.Fatalf("updated event differs:\n got %#v\nwant %#v", got, testEvent)
	}
}
