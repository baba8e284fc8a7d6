package apiserver_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/testenv"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
	}
}

// crud runs create, get, list, update and delete for one kind through typed clients.
type crud struct {
	name   string
	create func(ctx context.Context, c kubernetes.Interface) (metav1.Object, error)
	get    func(ctx context.Context, c kubernetes.Interface) (metav1.Object, error)
	list   func(ctx context.Context, c kubernetes.Interface) (int, error)
	update func(ctx context.Context, c kubernetes.Interface, label string) (metav1.Object, error)
	delete func(ctx context.Context, c kubernetes.Interface) error
}

func TestCRUDEveryKind(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	ns := "default"
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	cases := []crud{
		{
			name: "configmaps",
			create: func(ctx context.Context, c kubernetes.Interface) (metav1.Object, error) {
				return c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta("cm1"), Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
			},
			get: func(ctx context.Context, c kubernetes.Interface) (metav1.Object, error) {
				return c.CoreV1().ConfigMaps(ns).Get(ctx, "cm1", metav1.GetOptions{})
			},
			list: func(ctx context.Context, c kubernetes.Interface) (int, error) {
				l, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			},
			update: func(ctx context.Context, c kubernetes.Interface, label string) (metav1.Object, error) {
				o, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm1", metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				o.Labels = map[string]string{"l": label}
				return c.CoreV1().ConfigMaps(ns).Update(ctx, o, metav1.UpdateOptions{})
			},
			delete: func(ctx context.Context, c kubernetes.Interface) error {
				return c.CoreV1().ConfigMaps(ns).Delete(ctx, "cm1", metav1.DeleteOptions{})
			},
		},
	}
	// The other kinds follow the same shape; build them from typed clients generically.
	cases = append(cases,
		typedCRUD("secrets", env.Client.CoreV1().Secrets(ns), &corev1.Secret{ObjectMeta: meta("s1"), StringData: map[string]string{"k": "v"}}),
		typedCRUD("serviceaccounts", env.Client.CoreV1().ServiceAccounts(ns), &corev1.ServiceAccount{ObjectMeta: meta("sa1")}),
		typedCRUD("pods", env.Client.CoreV1().Pods(ns), &corev1.Pod{ObjectMeta: meta("p1"), Spec: podTemplate("p").Spec}),
		typedCRUD("services", env.Client.CoreV1().Services(ns), &corev1.Service{ObjectMeta: meta("svc1"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 80}}}}),
		typedCRUD("endpoints", env.Client.CoreV1().Endpoints(ns), &corev1.Endpoints{ObjectMeta: meta("ep1")}),
		typedCRUD("events", env.Client.CoreV1().Events(ns), &corev1.Event{ObjectMeta: meta("ev1"), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p1", Namespace: ns}, Reason: "Test", Message: "hello", Type: "Normal", Source: corev1.EventSource{Component: "test"}}),
		typedCRUD("events.k8s.io", env.Client.EventsV1().Events(ns), &eventsv1.Event{ObjectMeta: meta("ev2"), EventTime: metav1.NowMicro(), ReportingController: "example.com/test", ReportingInstance: "i1", Action: "Testing", Reason: "Test", Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p1", Namespace: ns}, Note: "hi", Type: "Normal"}),
		typedCRUD("deployments", env.Client.AppsV1().Deployments(ns), &appsv1.Deployment{ObjectMeta: meta("d1"), Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d1"}}, Template: podTemplate("d1")}}),
		typedCRUD("replicasets", env.Client.AppsV1().ReplicaSets(ns), &appsv1.ReplicaSet{ObjectMeta: meta("rs1"), Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs1"}}, Template: podTemplate("rs1")}}),
		typedCRUD("endpointslices", env.Client.DiscoveryV1().EndpointSlices(ns), &discoveryv1.EndpointSlice{ObjectMeta: meta("es1"), AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}),
		typedCRUD("ingresses", env.Client.NetworkingV1().Ingresses(ns), &networkingv1.Ingress{ObjectMeta: meta("ing1"), Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "svc1", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}),
		typedCRUD("leases", env.Client.CoordinationV1().Leases(ns), &coordinationv1.Lease{ObjectMeta: meta("l1"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me")}}),
		typedCRUD("namespaces", env.Client.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crud-ns"}}),
		typedCRUD("nodes", env.Client.CoreV1().Nodes(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}),
		typedCRUD("ingressclasses", env.Client.NetworkingV1().IngressClasses(), &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}),
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			created, err := tc.create(ctx, env.Client)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetCreationTimestamp().Time.IsZero() {
				t.Fatalf("create returned no uid/resourceVersion/creationTimestamp: %+v", created)
			}
			got, err := tc.get(ctx, env.Client)
			if err != nil || got.GetUID() != created.GetUID() {
				t.Fatalf("get: %v (uid %v, want %v)", err, got, created.GetUID())
			}
			if n, err := tc.list(ctx, env.Client); err != nil || n < 1 {
				t.Fatalf("list: %d items, %v", n, err)
			}
			upd, err := tc.update(ctx, env.Client, "x")
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if upd.GetResourceVersion() == created.GetResourceVersion() || upd.GetLabels()["l"] != "x" {
				t.Fatalf("update did not take: rv %s→%s labels %v", created.GetResourceVersion(), upd.GetResourceVersion(), upd.GetLabels())
			}
			if err := tc.delete(ctx, env.Client); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if tc.name == "namespaces" {
				return // namespaces finish deleting through the namespace controller
			}
			if _, err := tc.get(ctx, env.Client); !apierrors.IsNotFound(err) {
				t.Fatalf("get after delete: want NotFound, got %v", err)
			}
		})
	}
}

// typedClient is the subset of every typed client that CRUD needs.
type typedClient[T interface {
	metav1.Object
	*E
}, E any, L any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

func typedCRUD[T interface {
	metav1.Object
	*E
}, E any, L any](name string, c typedClient[T, E, L], obj T) crud {
	objName := obj.GetName()
	return crud{
		name: name,
		create: func(ctx context.Context, _ kubernetes.Interface) (metav1.Object, error) {
			return c.Create(ctx, obj, metav1.CreateOptions{})
		},
		get: func(ctx context.Context, _ kubernetes.Interface) (metav1.Object, error) {
			return c.Get(ctx, objName, metav1.GetOptions{})
		},
		list: func(ctx context.Context, _ kubernetes.Interface) (int, error) {
			if _, err := c.List(ctx, metav1.ListOptions{}); err != nil {
				return 0, err
			}
			return 1, nil
		},
		update: func(ctx context.Context, _ kubernetes.Interface, label string) (metav1.Object, error) {
			o, err := c.Get(ctx, objName, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			o.SetLabels(map[string]string{"l": label})
			return c.Update(ctx, o, metav1.UpdateOptions{})
		},
		delete: func(ctx context.Context, _ kubernetes.Interface) error {
			return c.Delete(ctx, objName, metav1.DeleteOptions{})
		},
	}
}

func TestStaleUpdateConflicts(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	cms := env.Client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := cm.DeepCopy()
	cm.Data = map[string]string{"v": "1"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	first.Data = map[string]string{"v": "2"}
	_, err = cms.Update(ctx, first, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale update: want 409 Conflict, got %v", err)
	}
	// A JSON merge patch carrying the stale resourceVersion is a precondition too.
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"v":"3"}}`, first.ResourceVersion)
	if _, err := cms.Patch(ctx, "c", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale patch: want 409 Conflict, got %v", err)
	}
	// Preconditions on delete.
	err = cms.Delete(ctx, "c", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &first.ResourceVersion}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("delete with stale precondition: want 409, got %v", err)
	}
}

func TestPaginationReturnsEveryObjectOnce(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	cms := env.Client.CoreV1().ConfigMaps("default")
	const n = 57
	for i := 0; i < n; i++ {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("page-%03d", i), Labels: map[string]string{"set": "p"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	opts := metav1.ListOptions{Limit: 10, LabelSelector: "set=p"}
	pages := 0
	for {
		l, err := cms.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		for _, it := range l.Items {
			seen[it.Name]++
		}
		// A write between pages must not show up in the consistent snapshot.
		if pages == 2 {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "page-late", Labels: map[string]string{"set": "p"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if len(seen) != n || pages != 6 {
		t.Fatalf("got %d distinct objects in %d pages, want %d in 6", len(seen), pages, n)
	}
	for name, c := range seen {
		if c != 1 {
			t.Fatalf("%s returned %d times", name, c)
		}
	}
}

func TestSelectors(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	pods := env.Client.CoreV1().Pods("default")
	for i, node := range []string{"node-a", "node-b", "node-a"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"idx": fmt.Sprint(i), "tier": map[bool]string{true: "front", false: "back"}[i%2 == 0]}}, Spec: podTemplate("x").Spec}
		p.Spec.NodeName = node
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// status.phase through the status subresource.
	p1, _ := pods.Get(ctx, "p1", metav1.GetOptions{})
	p1.Status.Phase = corev1.PodRunning
	if _, err := pods.UpdateStatus(ctx, p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := func(opts metav1.ListOptions) []string {
		t.Helper()
		for _, rv := range []string{"", "0"} {
			opts.ResourceVersion = rv
			l, err := pods.List(ctx, opts)
			if err != nil {
				t.Fatalf("list %+v: %v", opts, err)
			}
			var out []string
			for _, p := range l.Items {
				out = append(out, p.Name)
			}
			sort.Strings(out)
			if rv == "0" {
				return out
			}
		}
		return nil
	}
	check := func(opts metav1.ListOptions, want string) {
		t.Helper()
		var got string
		// The rv=0 list is served from the watch cache, which may lag a moment.
		for i := 0; i < 50; i++ {
			got = fmt.Sprint(names(opts))
			if got == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%+v: got %s, want %s", opts, got, want)
	}
	check(metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"}, "[p0 p2]")
	check(metav1.ListOptions{FieldSelector: "status.phase=Running"}, "[p1]")
	check(metav1.ListOptions{FieldSelector: "status.phase!=Running,spec.nodeName=node-a"}, "[p0 p2]")
	check(metav1.ListOptions{FieldSelector: "metadata.name=p2"}, "[p2]")
	check(metav1.ListOptions{LabelSelector: "tier=front"}, "[p0 p2]")
	check(metav1.ListOptions{LabelSelector: "idx in (0,1),tier!=front"}, "[p1]")
	if _, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unknown field selector: want 400, got %v", err)
	}
}

func TestInformerSeesChangesInOrderAcrossWatchTimeouts(t *testing.T) {
	env := testenv.Start(t, testenv.Options{MaxWatchTimeout: time.Second})
	ctx := ctxT(t)
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	var mu sync.Mutex
	var events []string
	record := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { record("add " + obj.(*corev1.ConfigMap).Name) },
		UpdateFunc: func(old, cur interface{}) {
			o, c := old.(*corev1.ConfigMap), cur.(*corev1.ConfigMap)
			if o.ResourceVersion != c.ResourceVersion {
				record("update " + c.Name + " " + c.Data["v"])
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			record("delete " + obj.(*corev1.ConfigMap).Name)
		},
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	cms := env.Client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "i"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Spread updates over several server-side watch timeouts (1 s each).
	for i := 1; i <= 3; i++ {
		time.Sleep(1200 * time.Millisecond)
		cm.Data["v"] = fmt.Sprint(i)
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.Delete(ctx, "i", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "[add i update i 1 update i 2 update i 3 delete i]"
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := fmt.Sprint(events)
		mu.Unlock()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("informer events: got %s, want %s", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSelfSubjectReviewNamesTheCaller(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	r, err := env.Client.AuthenticationV1().SelfSubjectReviews().Create(ctxT(t), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.UserInfo.Username != "kubernetes-admin" || fmt.Sprint(r.Status.UserInfo.Groups) != "[system:masters system:authenticated]" {
		t.Fatalf("user info %+v", r.Status.UserInfo)
	}
	if _, err := env.Client.AuthenticationV1().RESTClient().Get().Resource("selfsubjectreviews").DoRaw(ctxT(t)); !apierrors.IsMethodNotSupported(err) {
		t.Fatalf("list of selfsubjectreviews: want 405, got %v", err)
	}
}
