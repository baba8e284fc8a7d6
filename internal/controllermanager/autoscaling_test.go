package controllermanager_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/podautoscaler"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestHorizontalPodAutoscalerController runs the registered HPA controller as its
// ServiceAccount through the manager: it reads the Deployment's scale with its own
// identity and asks the metrics API, whose answer (none is served here, or no pod has
// metrics) it reports in the ScalingActive condition.
func TestHorizontalPodAutoscalerController(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(ctx, controller.ManagerOptions{
			Config: env.Config, ControllerConfig: env.ServiceAccountConfig, Enabled: []string{podautoscaler.Name},
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	c := env.Client
	lbls := map[string]string{"app": "web"}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "web:1"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the autoscaler's conditions", func() error {
		h, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds := h.Status.Conditions
		if len(conds) != 2 || conds[0].Reason != "SucceededGetScale" || conds[1].Reason != "FailedGetResourceMetric" ||
			!strings.HasPrefix(conds[1].Message, "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: ") {
			return fmt.Errorf("conditions %+v", conds)
		}
		if h.Status.CurrentReplicas != 1 {
			return fmt.Errorf("currentReplicas %d", h.Status.CurrentReplicas)
		}
		return nil
	})
}
