package replication

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/replicaset"
)

func newRC(name string, replicas int32) *corev1.ReplicationController {
	lbls := map[string]string{"name": name}
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Generation: 2, ResourceVersion: "7"},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas),
			Selector: lbls,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example/app:1"}},
					RestartPolicy: corev1.RestartPolicyAlways},
			},
		},
	}
}

func TestConversionRoundTrip(t *testing.T) {
	rc := newRC("web", 3)
	rc.Spec.MinReadySeconds = 5
	rc.Status = corev1.ReplicationControllerStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 2,
		Conditions: []corev1.ReplicationControllerCondition{{Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}}}
	rs := ToReplicaSet(rc)
	if got := metav1.FormatLabelSelector(rs.Spec.Selector); got != "name=web" {
		t.Errorf("selector = %s", got)
	}
	if rs.Name != "web" || rs.UID != rc.UID || *rs.Spec.Replicas != 3 || rs.Spec.MinReadySeconds != 5 || rs.Spec.Template.Labels["name"] != "web" {
		t.Errorf("converted = %+v", rs)
	}
	if len(rs.Status.Conditions) != 1 || rs.Status.Conditions[0].Type != appsv1.ReplicaSetReplicaFailure {
		t.Errorf("conditions = %+v", rs.Status.Conditions)
	}
	back := FromReplicaSet(rs)
	rc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ReplicationController"}
	if !reflect.DeepEqual(back, rc) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, rc)
	}
	if rs := ToReplicaSet(&corev1.ReplicationController{}); rs.Spec.Selector != nil {
		t.Errorf("nil selector became %v", rs.Spec.Selector)
	}
}

type fixture struct {
	client   *fake.Clientset
	recorder *record.FakeRecorder
	c        *replicaset.Controller
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	var seq atomic.Int64
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pod := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" {
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, seq.Add(1))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	recorder.IncludeObject = true
	r, err := New(controller.Deps{Client: client, Informers: factory, Recorder: func(string) record.EventRecorder { return recorder }})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.ReplicationController:
			err = factory.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{client: client, recorder: recorder, c: r.(*replicaset.Controller)}
}

func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get" {
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

// TestCreatesPodsOwnedByTheReplicationController syncs an RC without pods: its pods
// are created with the RC as controller, the events name the RC, and its status is
// written through replicationcontrollers/status.
func TestCreatesPodsOwnedByTheReplicationController(t *testing.T) {
	rc := newRC("web", 2)
	f := newFixture(t, rc)
	if err := f.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := []string{"create pods", "create pods", "update replicationcontrollers/status"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	pods, err := f.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != rc.UID {
			t.Errorf("pod %s controller = %+v", p.Name, ref)
		}
		if !strings.HasPrefix(p.Name, "web-") || p.Labels["name"] != "web" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
	}
	for range 2 {
		e := <-f.recorder.Events
		if !strings.Contains(e, "SuccessfulCreate") || !strings.Contains(e, "kind=ReplicationController") || !strings.Contains(e, "apiVersion=v1") {
			t.Errorf("event %q, want SuccessfulCreate on the ReplicationController", e)
		}
	}
	got, err := f.client.CoreV1().ReplicationControllers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Replicas != 0 || got.Status.ObservedGeneration != 2 {
		t.Errorf("status = %+v, want 0 replicas (the pods seen before this sync), observedGeneration 2", got.Status)
	}
	if got.Spec.Selector["name"] != "web" || len(got.Spec.Selector) != 1 {
		t.Errorf("selector after the status write = %v", got.Spec.Selector)
	}
}

// TestAdoptsAndDeletes: an orphan matching the selector is adopted as the RC's, and
// pods beyond spec.replicas are deleted.
func TestAdoptsAndDeletes(t *testing.T) {
	rc := newRC("web", 1)
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: map[string]string{"name": "web"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	f := newFixture(t, rc, pod("a"), pod("b"))
	if err := f.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := []string{"patch pods", "patch pods", "delete pods", "update replicationcontrollers/status"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Fatalf("writes = %v, want %v", got, want)
	}
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && !strings.Contains(string(p.GetPatch()), `"kind":"ReplicationController"`) {
			t.Errorf("adoption patch %s", p.GetPatch())
		}
	}
}
