package serviceaccount

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kubette/kubette/internal/controller/worker"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller"
)

type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	ctrl    *Controller
}

// newFixture builds a controller over a fake clientset holding objs; the namespaces and
// service accounts among them are also put in the (never started) informer caches.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewSimpleClientset(objs...)}
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	c, err := New(controller.Deps{Client: f.client, Informers: f.factory})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.queue.ShutDown)
	f.ctrl = c
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			err = f.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
		case *corev1.ServiceAccount:
			err = f.factory.Core().V1().ServiceAccounts().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if ns := a.GetNamespace(); ns != "" {
			s += " " + ns
		}
		out = append(out, s)
	}
	return out
}

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	if phase == corev1.NamespaceTerminating {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
	}
	return ns
}

func serviceAccount(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func assertActions(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("actions:\n got %q\nwant %q", got, want)
	}
}

func TestSyncCreatesDefaultServiceAccount(t *testing.T) {
	f := newFixture(t, namespace("ns1", corev1.NamespaceActive))
	if err := f.ctrl.Sync(context.Background(), "ns1"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, f.actions(), []string{"create serviceaccounts ns1"})
	sa, err := f.client.CoreV1().ServiceAccounts("ns1").Get(context.Background(), DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("default service account: %v", err)
	}
	if sa.Namespace != "ns1" {
		t.Errorf("namespace = %q", sa.Namespace)
	}
}

func TestSyncLeavesExistingServiceAccount(t *testing.T) {
	f := newFixture(t, namespace("ns1", corev1.NamespaceActive), serviceAccount("ns1", DefaultName))
	if err := f.ctrl.Sync(context.Background(), "ns1"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, f.actions(), nil)
}

func TestSyncSkipsNamespacesThatAreNotActive(t *testing.T) {
	for _, ns := range []*corev1.Namespace{
		namespace("terminating", corev1.NamespaceTerminating),
		namespace("unknown-phase", ""),
	} {
		f := newFixture(t, ns)
		if err := f.ctrl.Sync(context.Background(), ns.Name); err != nil {
			t.Errorf("Sync(%s): %v", ns.Name, err)
		}
		assertActions(t, f.actions(), nil)
	}
}

func TestSyncIgnoresMissingNamespace(t *testing.T) {
	f := newFixture(t)
	if err := f.ctrl.Sync(context.Background(), "gone"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, f.actions(), nil)
}

func TestSyncIgnoresAlreadyExists(t *testing.T) {
	f := newFixture(t, namespace("ns1", corev1.NamespaceActive))
	f.client.PrependReactor("create", "serviceaccounts", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "serviceaccounts"}, DefaultName)
	})
	if err := f.ctrl.Sync(context.Background(), "ns1"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// terminatingForbidden is upstream's NamespaceLifecycle refusal.
func terminatingForbidden(withCause bool) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, DefaultName,
		errors.New("unable to create new content in namespace ns1 because it is being terminated"))
	if withCause {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: "namespace ns1 is being terminated", Field: "metadata.namespace",
		})
	}
	return err
}

func TestSyncIgnoresTerminatingNamespaceRefusal(t *testing.T) {
	// The cache still says Active; the server already knows better.
	t.Run("with the NamespaceTerminating cause", func(t *testing.T) {
		f := newFixture(t, namespace("ns1", corev1.NamespaceActive))
		f.client.PrependReactor("create", "serviceaccounts", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, terminatingForbidden(true)
		})
		if err := f.ctrl.Sync(context.Background(), "ns1"); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		assertActions(t, f.actions(), []string{"create serviceaccounts ns1"})
	})
	t.Run("without the cause, confirmed by the namespace", func(t *testing.T) {
		f := newFixture(t, namespace("ns1", corev1.NamespaceActive))
		f.client.PrependReactor("create", "serviceaccounts", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, terminatingForbidden(false)
		})
		f.client.PrependReactor("get", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, namespace("ns1", corev1.NamespaceTerminating), nil
		})
		if err := f.ctrl.Sync(context.Background(), "ns1"); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		assertActions(t, f.actions(), []string{"create serviceaccounts ns1", "get namespaces"})
	})
	t.Run("another 403 is an error", func(t *testing.T) {
		f := newFixture(t, namespace("ns1", corev1.NamespaceActive))
		f.client.PrependReactor("create", "serviceaccounts", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, DefaultName, errors.New("denied"))
		})
		if err := f.ctrl.Sync(context.Background(), "ns1"); !apierrors.IsForbidden(err) {
			t.Fatalf("Sync = %v, want the 403", err)
		}
	})
}

func TestSyncReturnsCreateErrors(t *testing.T) {
	f := newFixture(t, namespace("ns1", corev1.NamespaceActive))
	f.client.PrependReactor("create", "serviceaccounts", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	err := f.ctrl.Sync(context.Background(), "ns1")
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("Sync = %v, want the 503", err)
	}
	// The worker retries it with backoff.
	f.ctrl.queue.Add("ns1")
	worker.ProcessNext(context.Background(), f.ctrl.queue, f.ctrl.workerOptions(1))
	if n := f.ctrl.queue.NumRequeues("ns1"); n != 1 {
		t.Errorf("NumRequeues = %d, want 1", n)
	}
}

func TestEventsQueueTheNamespace(t *testing.T) {
	f := newFixture(t)
	f.ctrl.namespaceChanged(namespace("added", corev1.NamespaceActive))
	f.ctrl.serviceAccountDeleted(serviceAccount("sa-gone", DefaultName))
	f.ctrl.serviceAccountDeleted(cache.DeletedFinalStateUnknown{Key: "tomb/default", Obj: serviceAccount("tomb", DefaultName)})
	f.ctrl.serviceAccountDeleted("not an object")
	if n := f.ctrl.queue.Len(); n != 3 {
		t.Fatalf("%d keys queued, want 3", n)
	}
	var got []string
	for range 3 {
		key, _ := f.ctrl.queue.Get()
		got = append(got, key)
		f.ctrl.queue.Done(key)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"added", "sa-gone", "tomb"}) {
		t.Errorf("queued %q", got)
	}
}

func TestNewRequiresClients(t *testing.T) {
	if _, err := New(controller.Deps{}); err == nil {
		t.Error("New with no clients succeeded")
	}
}
