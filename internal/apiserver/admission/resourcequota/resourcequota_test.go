package resourcequota

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

type cacheOf struct{ client *fake.Clientset }

// List reads the fake client, standing in for the watch cache.
func (c cacheOf) List(ctx context.Context, _ schema.GroupResource, ns string) ([]runtime.Object, error) {
	l, err := c.client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

// ListLive reads the fake client too.
func (c cacheOf) ListLive(ctx context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	return c.List(ctx, gr, ns)
}

// laggingCache is a watch cache that has not seen any quota yet; lives counts the
// live lookups.
type laggingCache struct {
	cacheOf
	lives int
}

func (c *laggingCache) List(context.Context, schema.GroupResource, string) ([]runtime.Object, error) {
	return nil, nil
}

func (c *laggingCache) ListLive(ctx context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	c.lives++
	return c.cacheOf.List(ctx, gr, ns)
}

// TestLiveLookup: a quota the watch cache has not seen yet is found in storage, so a
// namespace's first creates after the quota's are charged and the next refused; the
// lookup is kept for liveTTL, then made again.
func TestLiveLookup(t *testing.T) {
	client := fake.NewSimpleClientset(newQuota("q", rl("pods", "2"), rl("pods", "0")))
	// Storage gives every write a new resource version, as the API server does.
	rv := 1
	client.PrependReactor("update", "resourcequotas", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv++
		a.(k8stesting.UpdateAction).GetObject().(*corev1.ResourceQuota).ResourceVersion = strconv.Itoa(rv)
		return false, nil, nil
	})
	l := &laggingCache{cacheOf: cacheOf{client}}
	p := New(l, client.CoreV1())
	now := time.Now()
	p.now = func() time.Time { return now }
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if err := p.Validate(ctx, podAttrs(name, false, corev1.Container{Name: "c"})); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	err := p.Validate(ctx, podAttrs("c", false, corev1.Container{Name: "c"}))
	if want := `pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`; err == nil || err.Error() != want {
		t.Fatalf("%v\nwant %q", err, want)
	}
	if l.lives != 1 {
		t.Fatalf("%d live lookups within the TTL, want 1", l.lives)
	}
	now = now.Add(liveTTL)
	_ = p.Validate(ctx, podAttrs("d", false, corev1.Container{Name: "c"}))
	if l.lives != 2 {
		t.Fatalf("%d live lookups after the TTL, want 2", l.lives)
	}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func newQuota(name string, hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"},
		Spec:   corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
		Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func podAttrs(name string, dryRun bool, c corev1.Container) *admission.Attributes {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	return &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		Operation: admission.Create, Object: p, Name: name, Namespace: "ns", DryRun: dryRun}
}

func TestChargeAndRefuse(t *testing.T) {
	client := fake.NewSimpleClientset(newQuota("q", rl("pods", "2", "requests.memory", "1Gi"), rl("pods", "1", "requests.memory", "0")),
		newQuota("best", rl("pods", "1"), rl("pods", "0"), corev1.ResourceQuotaScopeBestEffort))
	p := New(cacheOf{client}, client.CoreV1())
	ctx := context.Background()
	withMem := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("memory", "512Mi")}}
	// A dry run checks and charges nothing.
	if err := p.Validate(ctx, podAttrs("dry", true, withMem)); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(ctx, podAttrs("a", false, withMem)); err != nil {
		t.Fatal(err)
	}
	q, _ := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
	if got := q.Status.Used[corev1.ResourcePods]; got.String() != "2" {
		t.Fatalf("used %v after one charge", q.Status.Used)
	}
	if got := q.Status.Used[corev1.ResourceRequestsMemory]; got.String() != "512Mi" {
		t.Fatalf("used %v after one charge", q.Status.Used)
	}
	// The BestEffort quota does not select a pod with requests.
	best, _ := client.CoreV1().ResourceQuotas("ns").Get(ctx, "best", metav1.GetOptions{})
	if got := best.Status.Used[corev1.ResourcePods]; got.String() != "0" {
		t.Fatalf("best-effort quota charged: %v", best.Status.Used)
	}
	err := p.Validate(ctx, podAttrs("b", false, withMem))
	want := `pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`
	if err == nil || err.Error() != want {
		t.Fatalf("%v\nwant %q", err, want)
	}
	err = p.Validate(ctx, podAttrs("c", false, corev1.Container{Name: "c"}))
	want = `pods "c" is forbidden: failed quota: q: must specify requests.memory for: c`
	if err == nil || err.Error() != want {
		t.Fatalf("%v\nwant %q", err, want)
	}
}

func TestStatusUnknown(t *testing.T) {
	q := newQuota("q", rl("pods", "2"), nil)
	client := fake.NewSimpleClientset(q)
	err := New(cacheOf{client}, client.CoreV1()).Validate(context.Background(), podAttrs("a", false, corev1.Container{Name: "c"}))
	want := `pods "a" is forbidden: status unknown for quota: q, resources: pods`
	if err == nil || err.Error() != want {
		t.Fatalf("%v\nwant %q", err, want)
	}
}

func TestOtherResources(t *testing.T) {
	client := fake.NewSimpleClientset(newQuota("q", rl("count/deployments.apps", "1", "services.nodeports", "1"), rl("count/deployments.apps", "1", "services.nodeports", "0")))
	p := New(cacheOf{client}, client.CoreV1())
	ctx := context.Background()
	a := &admission.Attributes{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Operation: admission.Create, Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}}, Name: "d", Namespace: "ns"}
	err := p.Validate(ctx, a)
	if want := `deployments.apps "d" is forbidden: exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1`; err == nil || err.Error() != want {
		t.Fatalf("%v\nwant %q", err, want)
	}
	// A service turned into a NodePort service with two ports needs two node ports.
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: "3"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}, {Port: 2}}}}
	cur := old.DeepCopy()
	cur.Spec.Type = corev1.ServiceTypeNodePort
	err = p.Validate(ctx, &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("services"), Operation: admission.Update,
		Object: cur, OldObject: old, Name: "s", Namespace: "ns"})
	if want := `services "s" is forbidden: exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1`; err == nil || err.Error() != want {
		t.Fatalf("%v\nwant %q", err, want)
	}
}
