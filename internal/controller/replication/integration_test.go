package replication_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/garbagecollector"
	"github.com/kubette/kubette/internal/controller/replication"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

func rc(name string, replicas int32) *corev1.ReplicationController {
	// Selector and labels are left to the API server's defaults (the template's labels).
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas),
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}},
			},
		},
	}
}

// ownedPods lists the pods of name's selector, split by whether the RC controls them.
func ownedPods(c kubernetes.Interface, name string, uid string) (owned, orphans int, err error) {
	pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "name=" + name})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref != nil && string(ref.UID) == uid && ref.Kind == "ReplicationController" {
			owned++
		} else {
			orphans++
		}
	}
	return owned, orphans, nil
}

func wantPods(t *testing.T, c kubernetes.Interface, name, uid string, owned, orphans int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d pods of %s and %d orphans", owned, name, orphans), func() error {
		o, n, err := ownedPods(c, name, uid)
		if err != nil {
			return err
		}
		if o != owned || n != orphans {
			return fmt.Errorf("%d owned, %d orphans", o, n)
		}
		return nil
	})
}

// TestReplicationManager runs the replication manager and the garbage collector in the
// controller manager against an API server: an RC gets its pods and its status, is
// scaled through its scale subresource, and its deletion orphans the pods by default
// and deletes them in the background when asked.
func TestReplicationManager(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() {
		runErr <- controllermanager.Run(runCtx, controller.ManagerOptions{Config: env.Config,
			Enabled: []string{replication.Name, garbagecollector.Name}})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})

	created, err := c.CoreV1().ReplicationControllers(ns).Create(ctx, rc("web", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Selector["name"] != "web" || created.Labels["name"] != "web" {
		t.Fatalf("selector %v and labels %v not defaulted from the template", created.Spec.Selector, created.Labels)
	}
	uid := string(created.UID)
	wantPods(t, c, "web", uid, 2, 0)
	poll.Until(t, "status of 2 replicas", func() error {
		got, err := c.CoreV1().ReplicationControllers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Replicas != 2 || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("status %+v at generation %d", got.Status, got.Generation)
		}
		return nil
	})

	// The scale subresource.
	sc, err := c.CoreV1().ReplicationControllers(ns).GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 2 || sc.Status.Replicas != 2 || sc.Status.Selector != "name=web" {
		t.Fatalf("scale = %+v", sc)
	}
	sc = &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, ResourceVersion: sc.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if _, err := c.CoreV1().ReplicationControllers(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantPods(t, c, "web", uid, 3, 0)

	// Deleted without options: the pods are orphaned.
	if err := c.CoreV1().ReplicationControllers(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantPods(t, c, "web", uid, 0, 3)

	// Deleted in the background: the pods go with it.
	db, err := c.CoreV1().ReplicationControllers(ns).Create(ctx, rc("db", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantPods(t, c, "db", string(db.UID), 2, 0)
	if err := c.CoreV1().ReplicationControllers(ns).Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	wantPods(t, c, "db", string(db.UID), 0, 0)
}
