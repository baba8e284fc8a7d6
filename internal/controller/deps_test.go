package controller_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestServePodsAsObjects runs the shared pod informer of an in-process controller
// manager over the object watch: it lists, sees a pod created, its status changed
// and its deletion, as client-go's informer would, with managedFields kept.
// Over a kubeconfig (another process) the factory is left as it was.
func TestServePodsAsObjects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	env := testenv.Start(t, testenv.Options{})
	adminCfg, admin := env.Config, env.Client

	// Over the network: nothing is registered.
	remote, remoteStarter, err := controller.NewDeps(rest.CopyConfig(adminCfg), "deps-test")
	if err != nil {
		t.Fatal(err)
	}
	remoteStarter.ServePodsAsObjects()
	remote.Informers.Start(ctx.Done())
	if synced := remote.Informers.WaitForCacheSync(ctx.Done()); len(synced) != 0 {
		t.Fatalf("over a kubeconfig ServePodsAsObjects registered informers: %v", synced)
	}

	cfg, err := env.ComponentConfig("controller-manager", "system:kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	before := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deps, starter, err := controller.NewDeps(cfg, "deps-test")
	if err != nil {
		t.Fatal(err)
	}
	starter.ServePodsAsObjects()
	inf := deps.Informers.Core().V1().Pods().Informer()
	type event struct{ typ, name, phase string }
	events := make(chan event, 100)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { p := obj.(*corev1.Pod); events <- event{"add", p.Name, string(p.Status.Phase)} },
		UpdateFunc: func(_, obj any) {
			p := obj.(*corev1.Pod)
			events <- event{"update", p.Name, string(p.Status.Phase)}
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				events <- event{"delete", p.Name, ""}
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	want := func(w event) {
		t.Helper()
		poll.Until(t, "informer event "+w.typ+" "+w.name, poll.True(func() bool {
			select {
			case e := <-events:
				return e == w
			default:
				return false
			}
		}))
	}
	want(event{"add", "before", "Pending"})

	created := before.DeepCopy()
	created.Name = "after"
	if _, err := admin.CoreV1().Pods("default").Create(ctx, created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(event{"add", "after", "Pending"})
	p, err := admin.CoreV1().Pods("default").Get(ctx, "after", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if _, err := admin.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(event{"update", "after", "Running"})

	got, err := deps.Informers.Core().V1().Pods().Lister().Pods("default").Get("after")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ManagedFields) == 0 {
		t.Errorf("the informer's pod has no managedFields: the controllers' copy keeps them")
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, "after", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	want(event{"delete", "after", ""})
}
