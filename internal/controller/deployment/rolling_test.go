package deployment

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

// TestReconcileNewReplicaSet is upstream's rolling_test.go table.
func TestReconcileNewReplicaSet(t *testing.T) {
	tests := []struct {
		deploymentReplicas  int32
		maxSurge            intstr.IntOrString
		oldReplicas         int32
		newReplicas         int32
		scaleExpected       bool
		expectedNewReplicas int32
	}{
		{deploymentReplicas: 10, maxSurge: intstr.FromInt32(0), oldReplicas: 10, newReplicas: 0, scaleExpected: false},
		{deploymentReplicas: 10, maxSurge: intstr.FromInt32(2), oldReplicas: 10, newReplicas: 0, scaleExpected: true, expectedNewReplicas: 2},
		{deploymentReplicas: 10, maxSurge: intstr.FromInt32(2), oldReplicas: 5, newReplicas: 0, scaleExpected: true, expectedNewReplicas: 7},
		{deploymentReplicas: 10, maxSurge: intstr.FromInt32(2), oldReplicas: 10, newReplicas: 2, scaleExpected: false},
		// Scale down.
		{deploymentReplicas: 2, maxSurge: intstr.FromInt32(2), oldReplicas: 2, newReplicas: 4, scaleExpected: true, expectedNewReplicas: 2},
		// Percentages round up.
		{deploymentReplicas: 3, maxSurge: intstr.FromString("25%"), oldReplicas: 3, newReplicas: 0, scaleExpected: true, expectedNewReplicas: 1},
	}
	for i, test := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			newRS := rs("foo-v2", test.newReplicas, nil, metav1.Time{})
			oldRS := rs("foo-v2", test.oldReplicas, nil, metav1.Time{})
			d := newDeployment("foo", test.deploymentReplicas, nil, &test.maxSurge, ptr.To(intstr.FromInt32(0)), nil)
			c, client, _ := newScaleController(t, newRS)
			scaled, err := c.reconcileNewReplicaSet(context.Background(), []*appsv1.ReplicaSet{oldRS, newRS}, newRS, d)
			if err != nil {
				t.Fatal(err)
			}
			if scaled != test.scaleExpected {
				t.Fatalf("scaled = %v, want %v", scaled, test.scaleExpected)
			}
			if !scaled {
				if n := len(client.Actions()); n != 0 {
					t.Errorf("%d actions, want none", n)
				}
				return
			}
			actions := client.Actions()
			if len(actions) != 1 {
				t.Fatalf("%d actions, want 1", len(actions))
			}
			got := actions[0].(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet)
			if *got.Spec.Replicas != test.expectedNewReplicas {
				t.Errorf("new replicas = %d, want %d", *got.Spec.Replicas, test.expectedNewReplicas)
			}
		})
	}
}

// TestReconcileOldReplicaSets is upstream's rolling_test.go table (maxSurge 0).
func TestReconcileOldReplicaSets(t *testing.T) {
	tests := []struct {
		deploymentReplicas  int32
		maxUnavailable      intstr.IntOrString
		oldReplicas         int32
		newReplicas         int32
		readyPodsFromOldRS  int32
		readyPodsFromNewRS  int32
		scaleExpected       bool
		expectedOldReplicas int32
	}{
		{deploymentReplicas: 10, maxUnavailable: intstr.FromInt32(0), oldReplicas: 10, newReplicas: 0, readyPodsFromOldRS: 10, scaleExpected: true, expectedOldReplicas: 9},
		{deploymentReplicas: 10, maxUnavailable: intstr.FromInt32(2), oldReplicas: 10, newReplicas: 0, readyPodsFromOldRS: 10, scaleExpected: true, expectedOldReplicas: 8},
		// Unhealthy replicas of old ReplicaSets are cleaned up.
		{deploymentReplicas: 10, maxUnavailable: intstr.FromInt32(2), oldReplicas: 10, newReplicas: 0, readyPodsFromOldRS: 8, scaleExpected: true, expectedOldReplicas: 8},
		// One unhealthy replica cleaned up, one ready one scaled down.
		{deploymentReplicas: 10, maxUnavailable: intstr.FromInt32(2), oldReplicas: 10, newReplicas: 0, readyPodsFromOldRS: 9, scaleExpected: true, expectedOldReplicas: 8},
		// Unavailable pods of the new ReplicaSet stop further scale-downs.
		{deploymentReplicas: 10, maxUnavailable: intstr.FromInt32(2), oldReplicas: 8, newReplicas: 2, readyPodsFromOldRS: 8, readyPodsFromNewRS: 0, scaleExpected: false},
	}
	for i, test := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			d := newDeployment("foo", test.deploymentReplicas, nil, ptr.To(intstr.FromInt32(0)), &test.maxUnavailable, map[string]string{"foo": "bar"})
			oldRS := newReplicaSet(d, "foo-old", test.oldReplicas)
			oldRS.Status.AvailableReplicas = test.readyPodsFromOldRS
			newRS := newReplicaSet(d, "foo-new", test.newReplicas)
			newRS.Status.AvailableReplicas = test.readyPodsFromNewRS
			c, client, _ := newScaleController(t, oldRS, newRS)
			scaled, err := c.reconcileOldReplicaSets(context.Background(), []*appsv1.ReplicaSet{oldRS, newRS}, []*appsv1.ReplicaSet{oldRS}, newRS, d)
			if err != nil {
				t.Fatal(err)
			}
			if scaled != test.scaleExpected {
				t.Fatalf("scaled = %v, want %v", scaled, test.scaleExpected)
			}
			if !scaled {
				return
			}
			actions := client.Actions()
			last := actions[len(actions)-1].(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet)
			if *last.Spec.Replicas != test.expectedOldReplicas {
				t.Errorf("old replicas = %d, want %d", *last.Spec.Replicas, test.expectedOldReplicas)
			}
		})
	}
}

// rolloutSim drives Sync against a fake clientset step by step, playing the
// ReplicaSet controller in between (status = spec, every pod available at
// once), and records the sizes the ReplicaSets go through.
type rolloutSim struct {
	t      *testing.T
	client *fake.Clientset
	key    string
	tick   int
}

func newRolloutSim(t *testing.T, objs ...runtime.Object) *rolloutSim {
	s := &rolloutSim{t: t, client: fake.NewSimpleClientset(objs...)}
	// The fake tracker keeps no creation times: number them so that the
	// creation order is the ReplicaSets' age order.
	s.client.PrependReactor("create", "replicasets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		r := a.(clienttesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
		s.tick++
		r.CreationTimestamp = metav1.NewTime(testNow.Add(time.Duration(s.tick) * time.Second))
		r.UID = types.UID("uid-" + r.Name)
		return false, nil, nil
	})
	return s
}

// sync runs one Sync with listers freshly loaded from the clientset.
func (s *rolloutSim) sync() {
	s.t.Helper()
	ctx := context.Background()
	inf := informers.NewSharedInformerFactory(s.client, 0)
	c, err := New(controller.Deps{Client: s.client, Informers: inf, Recorder: func(string) record.EventRecorder { return record.NewFakeRecorder(100) }})
	if err != nil {
		s.t.Fatal(err)
	}
	c.clock = clocktesting.NewFakePassiveClock(testNow)
	c.log = discardLog()
	ds, _ := s.client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	for i := range ds.Items {
		_ = inf.Apps().V1().Deployments().Informer().GetIndexer().Add(&ds.Items[i])
	}
	rss, _ := s.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	for i := range rss.Items {
		_ = inf.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(&rss.Items[i])
	}
	if err := c.Sync(ctx, s.key); err != nil {
		s.t.Fatalf("Sync: %v", err)
	}
}

// settle plays the ReplicaSet controller: every ReplicaSet runs its spec.
func (s *rolloutSim) settle() {
	ctx := context.Background()
	rss, _ := s.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	for i := range rss.Items {
		r := &rss.Items[i]
		n := *r.Spec.Replicas
		r.Status = appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: n, AvailableReplicas: n, ObservedGeneration: r.Generation}
		if _, err := s.client.AppsV1().ReplicaSets(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
			s.t.Fatal(err)
		}
	}
}

// sizes lists spec.replicas of the ReplicaSets, oldest first.
func (s *rolloutSim) sizes() []int32 {
	rss, _ := s.client.AppsV1().ReplicaSets("").List(context.Background(), metav1.ListOptions{})
	items := make([]*appsv1.ReplicaSet, len(rss.Items))
	for i := range rss.Items {
		items[i] = &rss.Items[i]
	}
	sort.Sort(byCreationTimestamp(items))
	var out []int32
	for _, r := range items {
		out = append(out, *r.Spec.Replicas)
	}
	return out
}

func (s *rolloutSim) deployment() *appsv1.Deployment {
	d, err := s.client.AppsV1().Deployments(metav1.NamespaceDefault).Get(context.Background(), "foo", metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// runToCompletion alternates sync and settle until nothing changes, checking
// the rolling-update bounds at every step (availability only when asked: a
// first rollout starts from nothing), and returns the distinct sizes.
func (s *rolloutSim) runToCompletion(replicas, surge, unavailable int32, checkAvailable bool) [][]int32 {
	s.t.Helper()
	var steps [][]int32
	for range 50 {
		s.sync()
		sizes := s.sizes()
		var total int32
		for _, n := range sizes {
			total += n
		}
		if total > replicas+surge {
			s.t.Errorf("step %v: %d replicas, more than %d + maxSurge %d", sizes, total, replicas, surge)
		}
		if len(steps) == 0 || !reflect.DeepEqual(steps[len(steps)-1], sizes) {
			steps = append(steps, sizes)
		} else {
			return steps
		}
		// Before the ReplicaSet controller acts, the pods that stay
		// available are the smaller of old spec and old status.
		rss, _ := s.client.AppsV1().ReplicaSets("").List(context.Background(), metav1.ListOptions{})
		var available int32
		for _, r := range rss.Items {
			available += min(*r.Spec.Replicas, r.Status.AvailableReplicas)
		}
		if checkAvailable && available < replicas-unavailable {
			s.t.Errorf("step %v: %d available, fewer than %d - maxUnavailable %d", sizes, available, replicas, unavailable)
		}
		s.settle()
	}
	s.t.Fatalf("no end after 50 steps: %v", steps)
	return nil
}

// TestRollingUpdateSteps runs whole rollouts and checks every step's sizes.
func TestRollingUpdateSteps(t *testing.T) {
	tests := []struct {
		replicas                 int32
		maxSurge, maxUnavailable intstr.IntOrString
		steps                    [][]int32 // old, new
	}{
		{3, intstr.FromInt32(1), intstr.FromInt32(0), [][]int32{{3, 1}, {2, 1}, {2, 2}, {1, 2}, {1, 3}, {0, 3}}},
		// The new ReplicaSet is created empty, and the old one shrinks in the same sync.
		{3, intstr.FromInt32(0), intstr.FromInt32(1), [][]int32{{2, 0}, {2, 1}, {1, 1}, {1, 2}, {0, 2}, {0, 3}}},
		{3, intstr.FromInt32(1), intstr.FromInt32(1), [][]int32{{2, 1}, {2, 2}, {0, 2}, {0, 3}}},
		// 25% of 4: surge 1 (rounds up), unavailable 1 (rounds down).
		{4, intstr.FromString("25%"), intstr.FromString("25%"), [][]int32{{3, 1}, {3, 2}, {1, 2}, {1, 4}, {0, 4}}},
		// 25% of 3: surge 1, unavailable 0.
		{3, intstr.FromString("25%"), intstr.FromString("25%"), [][]int32{{3, 1}, {2, 1}, {2, 2}, {1, 2}, {1, 3}, {0, 3}}},
		{10, intstr.FromInt32(3), intstr.FromInt32(2), [][]int32{{8, 3}, {8, 5}, {3, 5}, {3, 10}, {0, 10}}},
	}
	for _, test := range tests {
		name := fmt.Sprintf("%d replicas surge %s unavailable %s", test.replicas, test.maxSurge.String(), test.maxUnavailable.String())
		t.Run(name, func(t *testing.T) {
			d := newDeployment("foo", test.replicas, nil, &test.maxSurge, &test.maxUnavailable, map[string]string{"app": "foo"})
			surge, unavailable, err := resolveFenceposts(&test.maxSurge, &test.maxUnavailable, test.replicas)
			if err != nil {
				t.Fatal(err)
			}
			s := newRolloutSim(t, d)
			s.key = keyOf(d)
			first := s.runToCompletion(test.replicas, surge, unavailable, false)
			if want := [][]int32{{test.replicas}}; !reflect.DeepEqual(first, want) {
				t.Fatalf("first rollout steps %v, want %v", first, want)
			}
			if got := s.deployment().Annotations[revisionAnnotation]; got != "1" {
				t.Errorf("revision = %q, want 1", got)
			}

			d = s.deployment()
			d.Spec.Template.Spec.Containers[0].Image = "foo/bar:v2"
			d.Generation++
			if _, err := s.client.AppsV1().Deployments(d.Namespace).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			steps := s.runToCompletion(test.replicas, surge, unavailable, true)
			if !reflect.DeepEqual(steps, test.steps) {
				t.Errorf("steps %v, want %v", steps, test.steps)
			}
			final := s.deployment()
			if final.Annotations[revisionAnnotation] != "2" {
				t.Errorf("revision = %q, want 2", final.Annotations[revisionAnnotation])
			}
			st := final.Status
			if st.ObservedGeneration != final.Generation || st.UpdatedReplicas != test.replicas || st.Replicas != test.replicas || st.AvailableReplicas != test.replicas {
				t.Errorf("final status %+v is not what rollout status waits for", st)
			}
		})
	}
}
