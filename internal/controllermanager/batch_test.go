package controllermanager_test

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestJobControllersAsTheirServiceAccounts runs the Job and TTL-after-finished
// controllers (and the garbage collector, which ends the TTL's foreground deletion) as
// their ServiceAccounts, as `kubette up` does: the default RBAC policy must let them
// create and track the pods, update the status and delete the Job.
func TestJobControllersAsTheirServiceAccounts(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(ctx, controller.ManagerOptions{
			Config: env.Config, ControllerConfig: env.ServiceAccountConfig,
			Enabled: []string{"job", "ttl-after-finished", "garbagecollector"},
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	c := env.Client
	j, err := c.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "sa", Namespace: "default"},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "mark the Job's pod succeeded", func() error {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID)})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		if p.Status.Phase == corev1.PodSucceeded {
			return nil
		}
		p.Status.Phase = corev1.PodSucceeded
		// Once it succeeded the Job may finish and be deleted with its pod at
		// once (its TTL is 0): the pod is not looked at again.
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
		return err
	})
	poll.Until(t, "the finished Job is deleted after its TTL", func() error {
		list, err := c.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("job deletion %v, status %+v", list.Items[0].DeletionTimestamp, list.Items[0].Status)
		}
		return nil
	})
}
