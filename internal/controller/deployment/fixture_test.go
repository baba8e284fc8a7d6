package deployment

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

// The test fixture follows upstream's deployment_controller_test.go: objects
// preloaded into the informers' indexers and the fake clientset, Sync called
// directly, and the API actions it took compared with the expected ones.

// testNow is the fixed time of the fixture's clock.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// discardLog is a logger that drops everything.
func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newDeployment is upstream's test helper: a RollingUpdate Deployment with
// maxSurge and maxUnavailable 0 unless given.
func newDeployment(name string, replicas int32, revisionHistoryLimit *int32, maxSurge, maxUnavailable *intstr.IntOrString, selector map[string]string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			UID:         uuid.NewUUID(),
			Name:        name,
			Namespace:   metav1.NamespaceDefault,
			Annotations: map[string]string{},
			Generation:  1,
		},
		Spec: appsv1.DeploymentSpec{
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
				},
			},
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "foo/bar"}}},
			},
			RevisionHistoryLimit: revisionHistoryLimit,
		},
	}
	if maxSurge != nil {
		d.Spec.Strategy.RollingUpdate.MaxSurge = maxSurge
	}
	if maxUnavailable != nil {
		d.Spec.Strategy.RollingUpdate.MaxUnavailable = maxUnavailable
	}
	return d
}

// newReplicaSet is a ReplicaSet of d with d's template, controlled by d.
func newReplicaSet(d *appsv1.Deployment, name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{Kind: "ReplicaSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			UID:             uuid.NewUUID(),
			Namespace:       metav1.NamespaceDefault,
			Labels:          d.Spec.Selector.MatchLabels,
			OwnerReferences: []metav1.OwnerReference{*ownerRefTo(d)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Selector: d.Spec.Selector,
			Replicas: ptr.To(replicas),
			Template: *d.Spec.Template.DeepCopy(),
		},
	}
}

// rs is upstream's bare ReplicaSet helper of the scaling tests.
func rs(name string, replicas int32, selector map[string]string, timestamp metav1.Time) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			CreationTimestamp: timestamp,
			Namespace:         metav1.NamespaceDefault,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
		},
	}
}

// newRSWithStatus is rs with status.replicas set and a synced status.
func newRSWithStatus(name string, specReplicas, statusReplicas int32, selector map[string]string) *appsv1.ReplicaSet {
	r := rs(name, specReplicas, selector, metav1.Time{})
	r.Status.Replicas = statusReplicas
	return r
}

// newPod is a running pod controlled by rs.
func newPod(name string, rs *appsv1.ReplicaSet, phase corev1.PodPhase) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: rs.Namespace,
			UID:       uuid.NewUUID(),
			Labels:    rs.Spec.Selector.MatchLabels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes,
			}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// ownerRefTo is the controller reference to d.
func ownerRefTo(d *appsv1.Deployment) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

// fixture holds the objects of one Sync test and the actions it expects.
type fixture struct {
	t *testing.T

	client   *fake.Clientset
	recorder *record.FakeRecorder

	dLister   []*appsv1.Deployment
	rsLister  []*appsv1.ReplicaSet
	podLister []*corev1.Pod
	// objects are also in the fake clientset.
	objects []runtime.Object
	// actions are the expected ones, compared by verb, resource and subresource.
	actions []clienttesting.Action
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t}
}

// newController builds the controller over a fake clientset holding
// f.objects, with f's listers preloaded and a fixed clock.
func (f *fixture) newController() *Controller {
	f.client = fake.NewSimpleClientset(f.objects...)
	f.recorder = record.NewFakeRecorder(100)
	inf := informers.NewSharedInformerFactory(f.client, 0)
	c, err := New(controller.Deps{
		Client:    f.client,
		Informers: inf,
		Recorder:  func(string) record.EventRecorder { return f.recorder },
	})
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	c.clock = clocktesting.NewFakePassiveClock(testNow)
	c.log = discardLog()
	for _, d := range f.dLister {
		if err := inf.Apps().V1().Deployments().Informer().GetIndexer().Add(d); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, rs := range f.rsLister {
		if err := inf.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(rs); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, pod := range f.podLister {
		if err := inf.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
			f.t.Fatal(err)
		}
	}
	return c
}

func (f *fixture) expectCreateRSAction(rs *appsv1.ReplicaSet) {
	f.actions = append(f.actions, clienttesting.NewCreateAction(appsv1.SchemeGroupVersion.WithResource("replicasets"), rs.Namespace, rs))
}

func (f *fixture) expectUpdateRSAction(rs *appsv1.ReplicaSet) {
	f.actions = append(f.actions, clienttesting.NewUpdateAction(appsv1.SchemeGroupVersion.WithResource("replicasets"), rs.Namespace, rs))
}

func (f *fixture) expectPatchRSAction(rs *appsv1.ReplicaSet) {
	f.actions = append(f.actions, clienttesting.NewPatchAction(appsv1.SchemeGroupVersion.WithResource("replicasets"), rs.Namespace, rs.Name, "", nil))
}

func (f *fixture) expectDeleteRSAction(rs *appsv1.ReplicaSet) {
	f.actions = append(f.actions, clienttesting.NewDeleteAction(appsv1.SchemeGroupVersion.WithResource("replicasets"), rs.Namespace, rs.Name))
}

func (f *fixture) expectGetDeploymentAction(d *appsv1.Deployment) {
	f.actions = append(f.actions, clienttesting.NewGetAction(appsv1.SchemeGroupVersion.WithResource("deployments"), d.Namespace, d.Name))
}

func (f *fixture) expectUpdateDeploymentStatusAction(d *appsv1.Deployment) {
	f.actions = append(f.actions, clienttesting.NewUpdateSubresourceAction(appsv1.SchemeGroupVersion.WithResource("deployments"), "status", d.Namespace, d))
}

// run syncs key and checks the actions; it returns them for closer checks.
func (f *fixture) run(key string) []clienttesting.Action {
	f.t.Helper()
	return f.runExpectError(key, false)
}

func (f *fixture) runExpectError(key string, expectError bool) []clienttesting.Action {
	f.t.Helper()
	c := f.newController()
	err := c.Sync(context.Background(), key)
	if !expectError && err != nil {
		f.t.Errorf("Sync(%q): %v", key, err)
	} else if expectError && err == nil {
		f.t.Errorf("Sync(%q): expected an error", key)
	}
	actions := f.client.Actions()
	for i, action := range actions {
		if i >= len(f.actions) {
			f.t.Errorf("%d unexpected actions: %s", len(actions)-len(f.actions), describeActions(actions[i:]))
			break
		}
		want := f.actions[i]
		if !want.Matches(action.GetVerb(), action.GetResource().Resource) || want.GetSubresource() != action.GetSubresource() {
			f.t.Errorf("action %d: want %s, got %s", i, describeAction(want), describeAction(action))
		}
	}
	if len(f.actions) > len(actions) {
		f.t.Errorf("%d additional expected actions: %s", len(f.actions)-len(actions), describeActions(f.actions[len(actions):]))
	}
	return actions
}

func describeAction(a clienttesting.Action) string {
	s := a.GetVerb() + " " + a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		s += "/" + sub
	}
	return s
}

func describeActions(as []clienttesting.Action) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, describeAction(a))
	}
	return strings.Join(parts, ", ")
}

// drainEvents returns the events recorded so far.
func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func keyOf(d *appsv1.Deployment) string { return d.Namespace + "/" + d.Name }
