package replicaset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/replicaset"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// startController runs the ReplicaSet controller against env until the test ends.
func startController(t *testing.T, env *testenv.Env) {
	t.Helper()
	deps, starter, err := controller.NewDeps(env.Config, "replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	c, err := replicaset.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	starter.Start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func replicaSet(name string, replicas int32, lbls map[string]string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}},
			},
		},
	}
}

// activePods lists the active pods selected by lbls.
func activePods(ctx context.Context, client kubernetes.Interface, lbls map[string]string) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(lbls).String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// podsOf waits until rs controls exactly n active pods and returns them.
func podsOf(t *testing.T, client kubernetes.Interface, rs *appsv1.ReplicaSet, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	poll.Until(t, fmt.Sprintf("%d pods controlled by %s", n, rs.Name), func() error {
		all, err := activePods(context.Background(), client, rs.Spec.Selector.MatchLabels)
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range all {
			ref := metav1.GetControllerOf(&p)
			if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" ||
				!ptr.Deref(ref.BlockOwnerDeletion, false) {
				return fmt.Errorf("pod %s has controller %+v", p.Name, ref)
			}
			pods = append(pods, p)
		}
		if len(pods) != n {
			return fmt.Errorf("%d pods", len(pods))
		}
		return nil
	})
	return pods
}

func scale(t *testing.T, client kubernetes.Interface, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	poll.Until(t, "scale "+name, func() error {
		rs, err := client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rs.Spec.Replicas = ptr.To(replicas)
		_, err = client.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
		return err
	})
}

// markReady makes the pod Running and Ready through the status subresource, as a kubelet would.
func markReady(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	poll.Until(t, "mark "+name+" ready", func() error {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		}}
		_, err = client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func waitStatus(t *testing.T, client kubernetes.Interface, name string, check func(appsv1.ReplicaSetStatus, *appsv1.ReplicaSet) error) {
	t.Helper()
	poll.Until(t, "status of "+name, func() error {
		rs, err := client.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := check(rs.Status, rs); err != nil {
			return fmt.Errorf("%w (status %+v)", err, rs.Status)
		}
		return nil
	})
}

func TestReplicaSetAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	startController(t, env)
	client := env.Client
	ctx := context.Background()

	lbls := map[string]string{"app": "web"}
	rs, err := client.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet("web", 3, lbls), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	pods := podsOf(t, client, rs, 3)
	for _, p := range pods {
		if !strings.HasPrefix(p.Name, "web-") || p.Labels["app"] != "web" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
	}
	waitStatus(t, client, "web", func(s appsv1.ReplicaSetStatus, rs *appsv1.ReplicaSet) error {
		if s.Replicas != 3 || s.FullyLabeledReplicas != 3 || s.ObservedGeneration != rs.Generation {
			return fmt.Errorf("want 3 replicas at generation %d", rs.Generation)
		}
		return nil
	})

	t.Run("SuccessfulCreate event", func(t *testing.T) {
		poll.Until(t, "SuccessfulCreate event", func() error {
			evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: fields.SelectorFromSet(fields.Set{"involvedObject.name": "web", "reason": "SuccessfulCreate"}).String(),
			})
			if err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.Kind == "ReplicaSet" && e.InvolvedObject.UID == rs.UID &&
					e.Source.Component == "replicaset-controller" && strings.HasPrefix(e.Message, "Created pod: web-") {
					return nil
				}
			}
			return fmt.Errorf("%d matching events, none from the controller: %+v", len(evs.Items), evs.Items)
		})
	})

	t.Run("a deleted pod is replaced", func(t *testing.T) {
		victim := pods[0].Name
		if err := client.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "replacement", func() error {
			if _, err := client.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleted pod still there (err %v)", err)
			}
			return nil
		})
		for _, p := range podsOf(t, client, rs, 3) {
			if p.Name == victim {
				t.Errorf("deleted pod %s is back", victim)
			}
		}
	})

	t.Run("scale up and down", func(t *testing.T) {
		scale(t, client, "web", 5)
		podsOf(t, client, rs, 5)
		scale(t, client, "web", 1)
		podsOf(t, client, rs, 1)
		waitStatus(t, client, "web", func(s appsv1.ReplicaSetStatus, rs *appsv1.ReplicaSet) error {
			if s.Replicas != 1 || s.ObservedGeneration != rs.Generation {
				return fmt.Errorf("want 1 replica at generation %d", rs.Generation)
			}
			return nil
		})
	})

	t.Run("ready and available", func(t *testing.T) {
		scale(t, client, "web", 3)
		for _, p := range podsOf(t, client, rs, 3) {
			markReady(t, client, p.Name)
		}
		waitStatus(t, client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) error {
			if s.ReadyReplicas != 3 || s.AvailableReplicas != 3 {
				return fmt.Errorf("want 3 ready and available")
			}
			return nil
		})
	})

	t.Run("an orphan is adopted", func(t *testing.T) {
		// A running, ready orphan: when the new ReplicaSet has created a pod
		// before it sees the orphan, the surplus pending pod goes, not the orphan.
		db := map[string]string{"app": "db"}
		orphan := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns, Labels: db},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		markReady(t, client, "orphan")
		dbRS, err := client.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet("db", 1, db), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "orphan adopted as the only replica", func() error {
			pods, err := activePods(ctx, client, db)
			if err != nil {
				return err
			}
			if len(pods) != 1 || pods[0].Name != "orphan" {
				return fmt.Errorf("%d pods", len(pods))
			}
			if ref := metav1.GetControllerOf(&pods[0]); ref == nil || ref.UID != dbRS.UID {
				return fmt.Errorf("orphan's controller %+v", ref)
			}
			return nil
		})
		waitStatus(t, client, "db", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) error {
			if s.Replicas != 1 || s.ReadyReplicas != 1 || s.AvailableReplicas != 1 {
				return fmt.Errorf("want the adopted pod counted")
			}
			return nil
		})
	})

	t.Run("a relabelled pod is released and replaced", func(t *testing.T) {
		pods := podsOf(t, client, rs, 3)
		poll.Until(t, "relabel", func() error {
			p, err := client.CoreV1().Pods(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Labels = map[string]string{"app": "debug"}
			_, err = client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
		poll.Until(t, "release", func() error {
			p, err := client.CoreV1().Pods(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(p); ref != nil {
				return fmt.Errorf("still controlled by %+v", ref)
			}
			return nil
		})
		podsOf(t, client, rs, 3)
	})
}
