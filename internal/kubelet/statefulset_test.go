package kubelet

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/statefulset"
)

// The conformance test "Should recreate evicted statefulset" with this kubelet and the
// StatefulSet controller: a pod holds host port 21017 on the node; the StatefulSet's pod,
// bound to the node with the same port, is rejected (Failed, NodePorts), deleted and
// recreated by the controller; once the conflicting pod is deleted, a recreated pod runs.
func TestStatefulSetPodRejectedForAHostPortIsRecreated(t *testing.T) {
	c := newCluster(t)
	c.start()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	deps, starter, err := controller.NewDeps(c.env.Config, "statefulset-test")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := statefulset.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	wg.Go(func() { sc.Run(ctx, 1) })

	conflict := c.waitPod(c.createPod(hostPortPod("test-pod", "")), "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	w, err := c.client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "ss-0").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	labels := map[string]string{"app": "ss"}
	tmpl := hostPortPod("", "")
	tmpl.Spec.NodeName = testNode
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ss", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "test", Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
		},
	}
	if _, err := c.client.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A pod of the set is rejected and deleted at least once.
	var rejected types.UID
	timeout := time.After(60 * time.Second)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			p, isPod := ev.Object.(*v1.Pod)
			switch {
			case !isPod:
			case ev.Type == watch.Deleted && rejected != "":
				deleted = true
			case p.Status.Phase == v1.PodFailed:
				if p.Status.Reason != "NodePorts" || p.Status.Message != rejectedForPorts {
					t.Fatalf("ss-0 failed with %q %q", p.Status.Reason, p.Status.Message)
				}
				rejected = p.UID
			case p.Status.Phase == v1.PodRunning:
				t.Fatal("ss-0 runs while the host port is taken")
			}
		case <-timeout:
			t.Fatal("ss-0 never rejected and deleted")
		}
	}

	if err := c.client.CoreV1().Pods("default").Delete(ctx, conflict.Name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	var last *v1.Pod
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, "ss-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return p.Status.Phase == v1.PodRunning && p.UID != rejected, nil
	})
	if err != nil {
		t.Fatalf("ss-0 never recreated and running; last: %+v", last)
	}
}
