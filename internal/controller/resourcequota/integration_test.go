package resourcequota_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/resourcequota"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// start brings up a control plane and the quota controller.
func start(t *testing.T) *testenv.Env {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	d, starter, err := controller.NewDeps(env.Config, resourcequota.ClientName)
	if err != nil {
		t.Fatal(err)
	}
	c, err := resourcequota.New(d)
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); <-done })
	return env
}

func namespace(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitUsed waits until the quota's status says used[name] == want.
func waitUsed(t *testing.T, env *testenv.Env, ns, q string, name corev1.ResourceName, want string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("quota %s/%s to use %s=%s", ns, q, name, want), func() error {
		rq, err := env.Client.CoreV1().ResourceQuotas(ns).Get(context.Background(), q, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, ok := rq.Status.Used[name]
		if !ok || got.Cmp(resource.MustParse(want)) != 0 {
			return fmt.Errorf("status %+v", rq.Status)
		}
		return nil
	})
}

func pod(name string, cpu string) *corev1.Pod {
	c := corev1.Container{Name: "c", Image: "busybox"}
	if cpu != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

func TestQuotaThroughTheAPI(t *testing.T) {
	env := start(t)
	ctx := context.Background()
	namespace(t, env, "q")
	quotas := env.Client.CoreV1().ResourceQuotas("q")
	if _, err := quotas.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2"), "count/services": resource.MustParse("5")}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, env, "q", "q", corev1.ResourcePods, "0")
	pods := env.Client.CoreV1().Pods("q")
	for _, name := range []string{"p1", "p2"} {
		if _, err := pods.Create(ctx, pod(name, ""), metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	_, err := pods.Create(ctx, pod("p3", ""), metav1.CreateOptions{})
	want := `pods "p3" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("third pod: %v\nwant %q", err, want)
	}
	// The controller gives back what a deleted pod used.
	zero := int64(0)
	if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, env, "q", "q", corev1.ResourcePods, "1")
	if _, err := pods.Create(ctx, pod("p3", ""), metav1.CreateOptions{}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	// A service is counted in count/services.
	if _, err := env.Client.CoreV1().Services("q").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, env, "q", "q", "count/services", "1")
}

func TestQuotaComputeNeedsRequests(t *testing.T) {
	env := start(t)
	ctx := context.Background()
	namespace(t, env, "cpu")
	if _, err := env.Client.CoreV1().ResourceQuotas("cpu").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, env, "cpu", "compute", corev1.ResourceRequestsCPU, "0")
	pods := env.Client.CoreV1().Pods("cpu")
	_, err := pods.Create(ctx, pod("none", ""), metav1.CreateOptions{})
	if want := `pods "none" is forbidden: failed quota: compute: must specify requests.cpu for: c`; err == nil || err.Error() != want {
		t.Fatalf("no request: %v\nwant %q", err, want)
	}
	if _, err := pods.Create(ctx, pod("small", "600m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = pods.Create(ctx, pod("big", "600m"), metav1.CreateOptions{})
	if want := `pods "big" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1`; err == nil || err.Error() != want {
		t.Fatalf("over: %v\nwant %q", err, want)
	}
}

// TestConcurrentCreates races creates for the last units: exactly the quota's worth
// succeed.
func TestConcurrentCreates(t *testing.T) {
	env := start(t)
	ctx := context.Background()
	namespace(t, env, "race")
	if _, err := env.Client.CoreV1().ResourceQuotas("race").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("5")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, env, "race", "cm", corev1.ResourceConfigMaps, "0")
	const tries = 20
	var wg sync.WaitGroup
	errs := make([]error, tries)
	for i := range tries {
		wg.Go(func() {
			_, errs[i] = env.Client.CoreV1().ConfigMaps("race").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !apierrors.IsForbidden(err):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if created != 5 {
		t.Fatalf("%d configmaps created, want 5", created)
	}
	list, err := env.Client.CoreV1().ConfigMaps("race").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 5 {
		t.Fatalf("list: %d, %v", len(list.Items), err)
	}
	waitUsed(t, env, "race", "cm", corev1.ResourceConfigMaps, "5")
}
