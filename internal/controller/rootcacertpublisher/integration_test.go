package rootcacertpublisher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/rootcacertpublisher"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// waitForPublished waits until ns has the root CA ConfigMap with ca, other than the one
// with UID notUID, and returns it.
func waitForPublished(t *testing.T, c kubernetes.Interface, ns, ca, notUID string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	poll.Until(t, rootcacertpublisher.ConfigMapName+" in "+ns, func() error {
		got, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch {
		case string(got.UID) == notUID:
			return fmt.Errorf("still the deleted one (uid %s)", notUID)
		case got.Data[rootcacertpublisher.DataKey] != ca || len(got.Data) != 1:
			return fmt.Errorf("data %v", got.Data)
		case got.Annotations[rootcacertpublisher.DescriptionAnnotation] != rootcacertpublisher.Description:
			return fmt.Errorf("annotations %v", got.Annotations)
		}
		cm = got
		return nil
	})
	return cm
}

// TestPublishesTheKubeconfigsCA runs the publisher in the controller manager as a
// separate process would (over a kubeconfig, no RootCA given): every namespace gets the
// kubeconfig's CA, a deleted or altered ConfigMap comes back, a terminating namespace
// gets none.
func TestPublishesTheKubeconfigsCA(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	ca := string(env.Config.CAData)
	if ca == "" {
		t.Fatal("the test environment's kubeconfig has no CA data")
	}

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	// One worker: keys are processed in the order their events arrived (used below).
	wg.Go(func() {
		runErr <- controllermanager.Run(runCtx, controller.ManagerOptions{
			Config: env.Config, Enabled: []string{rootcacertpublisher.Name}, Workers: 1,
		})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})

	// Namespaces that existed before it started.
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		waitForPublished(t, c, ns, ca, "")
	}
	// New namespaces.
	for _, name := range []string{"team-a", "marker"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", name, err)
		}
	}
	cm := waitForPublished(t, c, "team-a", ca, "")

	// Its data changed: rewritten, the user's label kept.
	changed := cm.DeepCopy()
	changed.Data = map[string]string{rootcacertpublisher.DataKey: "not a CA", "extra": "x"}
	changed.Labels = map[string]string{"mine": "yes"}
	if _, err := c.CoreV1().ConfigMaps("team-a").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update config map: %v", err)
	}
	cm = waitForPublished(t, c, "team-a", ca, "")
	if cm.Labels["mine"] != "yes" {
		t.Errorf("labels after the rewrite = %v, want mine=yes kept", cm.Labels)
	}

	// Deleted: recreated.
	if err := c.CoreV1().ConfigMaps("team-a").Delete(ctx, rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete config map: %v", err)
	}
	waitForPublished(t, c, "team-a", ca, string(cm.UID))

	// In a terminating namespace (no namespace controller here, so it stays): not recreated.
	if err := c.CoreV1().Namespaces().Delete(ctx, "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	if err := c.CoreV1().ConfigMaps("team-a").Delete(ctx, rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete config map in the terminating namespace: %v", err)
	}
	// The marker's deletion comes after team-a's in the watch, so once the single worker
	// has recreated the marker's ConfigMap it has handled team-a's too.
	marker := waitForPublished(t, c, "marker", ca, "")
	if err := c.CoreV1().ConfigMaps("marker").Delete(ctx, rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete marker config map: %v", err)
	}
	waitForPublished(t, c, "marker", ca, string(marker.UID))
	if got, err := c.CoreV1().ConfigMaps("team-a").Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("config map in the terminating namespace = %v, %v; want 404", got, err)
	}
}

// TestPublishesTheGivenCA runs it in-process, as `kubette up` does: the component's
// client configuration carries no CA, so the manager is given the cluster's.
func TestPublishesTheGivenCA(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	cfg, err := env.ComponentConfig("controller-manager", "system:kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.CAData) != 0 || cfg.CAFile != "" {
		t.Fatal("the in-process configuration has a CA: this test would not test the RootCA option")
	}
	ca := string(env.Config.CAData)
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() {
		runErr <- controllermanager.Run(runCtx, controller.ManagerOptions{
			Config: cfg, ControllerConfig: env.ServiceAccountConfig, RootCA: env.Config.CAData, Enabled: []string{rootcacertpublisher.Name},
		})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})
	waitForPublished(t, env.Client, "default", ca, "")
}
