package serviceaccount_test

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
	"github.com/kubette/kubette/internal/controller/serviceaccount"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

func getDefault(c kubernetes.Interface, ns string) (*corev1.ServiceAccount, error) {
	return c.CoreV1().ServiceAccounts(ns).Get(context.Background(), serviceaccount.DefaultName, metav1.GetOptions{})
}

func waitForDefault(t *testing.T, c kubernetes.Interface, ns string, notUID string) *corev1.ServiceAccount {
	t.Helper()
	var sa *corev1.ServiceAccount
	poll.Until(t, "default service account in "+ns, func() error {
		got, err := getDefault(c, ns)
		if err != nil {
			return err
		}
		if string(got.UID) == notUID {
			return fmt.Errorf("still the deleted one (uid %s)", notUID)
		}
		sa = got
		return nil
	})
	return sa
}

func TestDefaultServiceAccounts(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()

	deps, starter, err := controller.NewDeps(env.Config, "serviceaccount-controller")
	if err != nil {
		t.Fatalf("NewDeps: %v", err)
	}
	sac, err := serviceaccount.New(deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	starter.Start(runCtx)
	// One worker: keys are processed in the order their events arrived (used below).
	wg.Go(func() { sac.Run(runCtx, 1) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	// Namespaces that existed before the controller started.
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		waitForDefault(t, c, ns, "")
	}

	// A new namespace.
	for _, name := range []string{"team-a", "marker"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", name, err)
		}
	}
	sa := waitForDefault(t, c, "team-a", "")

	// Deleted: recreated.
	if err := c.CoreV1().ServiceAccounts("team-a").Delete(ctx, serviceaccount.DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service account: %v", err)
	}
	waitForDefault(t, c, "team-a", string(sa.UID))

	// In a terminating namespace (no namespace controller here, so it stays): not recreated.
	if err := c.CoreV1().Namespaces().Delete(ctx, "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	if err := c.CoreV1().ServiceAccounts("team-a").Delete(ctx, serviceaccount.DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service account in the terminating namespace: %v", err)
	}
	// The marker's deletion comes after team-a's in the watch, so once the single worker
	// has recreated the marker's account it has handled team-a too.
	marker := waitForDefault(t, c, "marker", "")
	if err := c.CoreV1().ServiceAccounts("marker").Delete(ctx, serviceaccount.DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete marker service account: %v", err)
	}
	waitForDefault(t, c, "marker", string(marker.UID))
	if got, err := getDefault(c, "team-a"); !apierrors.IsNotFound(err) {
		t.Errorf("default service account in the terminating namespace = %v, %v; want 404", got, err)
	}
	if err := sac.Sync(ctx, "team-a"); err != nil {
		t.Errorf("Sync of the terminating namespace: %v", err)
	}
	if _, err := getDefault(c, "team-a"); !apierrors.IsNotFound(err) {
		t.Errorf("Sync created a service account in the terminating namespace: %v", err)
	}
}
