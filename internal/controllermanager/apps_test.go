package controllermanager_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestAppsControllersAsTheirServiceAccounts runs the DaemonSet and StatefulSet
// controllers as their ServiceAccounts, as `kubette up` does: the default RBAC policy must let it create the
// revision and the pod and write the status.
func TestAppsControllersAsTheirServiceAccounts(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(ctx, controller.ManagerOptions{
			Config: env.Config, ControllerConfig: env.ServiceAccountConfig,
			Enabled: []string{"daemonset", "statefulset"},
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	c := env.Client
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "agent"}
	if _, err := c.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agent:1"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the daemon pod, its revision and the status", func() error {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return err
		}
		revs, err := c.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return err
		}
		ds, err := c.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || len(revs.Items) != 1 || ds.Status.DesiredNumberScheduled != 1 || ds.Status.CurrentNumberScheduled != 1 {
			return fmt.Errorf("%d pods, %d revisions, status %+v", len(pods.Items), len(revs.Items), ds.Status)
		}
		return nil
	})
	web := map[string]string{"app": "web"}
	if _, err := c.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: web},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: web},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "web:1"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "web-0, its revision and the status", func() error {
		if _, err := c.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{}); err != nil {
			return err
		}
		set, err := c.AppsV1().StatefulSets("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if set.Status.Replicas != 1 || set.Status.UpdateRevision == "" {
			return fmt.Errorf("status %+v", set.Status)
		}
		_, err = c.AppsV1().ControllerRevisions("default").Get(ctx, set.Status.UpdateRevision, metav1.GetOptions{})
		return err
	})
}
