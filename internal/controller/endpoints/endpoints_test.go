package endpoints

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/controller/endpointtest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

// now is the time of the pods' readiness transitions in every unit test.
var now = endpointtest.Now()

const ns = endpointtest.Namespace

type fixture struct {
	t      *testing.T
	client *fake.Clientset
	c      *Controller
}

// newFixture builds a controller over a fake clientset holding objs, with the
// informer indexers preloaded with the same objects.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c, err := newController(controller.Deps{Client: client, Informers: factory,
		Recorder: func(string) record.EventRecorder { return recorder }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	endpointtest.Preload(t, factory, objs...)
	return &fixture{t: t, client: client, c: c}
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.c.Sync(context.Background(), ns+"/"+name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

func (f *fixture) wantActions(want ...string) {
	f.t.Helper()
	endpointtest.WantWrites(f.t, f.client, want...)
}

// written returns the Endpoints of the last create or update.
func (f *fixture) written() *corev1.Endpoints {
	f.t.Helper()
	acts := f.client.Actions()
	for i := len(acts) - 1; i >= 0; i-- {
		if a, ok := acts[i].(interface{ GetObject() runtime.Object }); ok {
			if ep, ok := a.GetObject().(*corev1.Endpoints); ok {
				return ep
			}
		}
	}
	f.t.Fatal("no Endpoints written")
	return nil
}

type svcOpt = endpointtest.ServiceOption

func newService(name string, opts ...svcOpt) *corev1.Service {
	return endpointtest.Service(name, opts...)
}

type podOpt = endpointtest.PodOption

// newPod returns a running, ready pod of app numbered n (see endpointtest.Pod).
func newPod(app string, n int, opts ...podOpt) *corev1.Pod {
	return endpointtest.Pod(fmt.Sprintf("%s-%04d", app, n), app, n, opts...)
}

func notReady() podOpt    { return endpointtest.NotReady() }
func terminating() podOpt { return endpointtest.Terminating() }

// describeSubsets renders subsets as "ready=[pods] notReady=[pods] ports=[name:port]" each.
func describeSubsets(subsets []corev1.EndpointSubset) []string {
	var out []string
	for _, s := range subsets {
		var ready, notReady, ports []string
		for _, a := range s.Addresses {
			ready = append(ready, a.TargetRef.Name)
		}
		for _, a := range s.NotReadyAddresses {
			notReady = append(notReady, a.TargetRef.Name)
		}
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.Port))
		}
		out = append(out, fmt.Sprintf("ready=%v notReady=%v ports=%v", ready, notReady, ports))
	}
	return out
}

func TestEndpointsSubsets(t *testing.T) {
	f := newFixture(t, newService("web"),
		newPod("web", 1), newPod("web", 2, notReady()), newPod("web", 3),
		newPod("web", 4, func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 9000 }),
		newPod("web", 5, terminating()),
		newPod("web", 6, func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }),
		newPod("web", 7, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		newPod("other", 8))
	f.mustSync("web")
	f.wantActions("create endpoints web")
	ep := f.written()
	// Subsets are packed by address set: web-0004 offers metrics:9100 with
	// the others, but its own http port.
	got := describeSubsets(ep.Subsets)
	want := []string{
		"ready=[web-0001 web-0003 web-0004] notReady=[web-0002] ports=[metrics:9100]",
		"ready=[web-0001 web-0003] notReady=[web-0002] ports=[http:8080]",
		"ready=[web-0004] notReady=[] ports=[http:9000]",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("subsets\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	a := ep.Subsets[0].Addresses[0]
	if a.IP != "10.1.0.2" || ptr.Deref(a.NodeName, "") != "node-a" ||
		*a.TargetRef != (corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0001", UID: "web-0001-uid"}) {
		t.Errorf("address %+v (target %+v)", a, a.TargetRef)
	}
	if ep.Labels["team"] != "web" || len(ep.Labels) != 1 {
		t.Errorf("labels %v", ep.Labels)
	}
	if got := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; got != now.Add(-time.Hour).Format(time.RFC3339Nano) {
		t.Errorf("trigger time %q", got)
	}
	if _, ok := ep.Annotations[corev1.EndpointsOverCapacity]; ok {
		t.Error("over-capacity annotation on a small Endpoints")
	}
}

func TestPublishNotReadyAddresses(t *testing.T) {
	svc := newService("web", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true; s.Spec.Ports = s.Spec.Ports[1:] })
	f := newFixture(t, svc, newPod("web", 1), newPod("web", 2, notReady()), newPod("web", 3, terminating()))
	f.mustSync("web")
	f.wantActions("create endpoints web")
	got := describeSubsets(f.written().Subsets)
	if want := []string{"ready=[web-0001 web-0002 web-0003] notReady=[] ports=[metrics:9100]"}; !slices.Equal(got, want) {
		t.Errorf("subsets %v, want %v", got, want)
	}
}

func TestHeadlessWithoutPorts(t *testing.T) {
	svc := newService("db", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone; s.Spec.Ports = nil })
	pod := newPod("db", 1, func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db" })
	f := newFixture(t, svc, pod)
	f.mustSync("db")
	f.wantActions("create endpoints db")
	ep := f.written()
	if got := describeSubsets(ep.Subsets); !slices.Equal(got, []string{"ready=[db-0001] notReady=[] ports=[]"}) {
		t.Errorf("subsets %v", got)
	}
	if ep.Subsets[0].Addresses[0].Hostname != "db-0" {
		t.Errorf("hostname %q", ep.Subsets[0].Addresses[0].Hostname)
	}
	if _, ok := ep.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("labels %v lack the headless marker", ep.Labels)
	}
}

// existing is what the controller would have written for svc and pods.
func existing(t *testing.T, svc *corev1.Service, pods ...*corev1.Pod) *corev1.Endpoints {
	t.Helper()
	subsets, _ := desiredSubsets(svc, pods)
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: ns, ResourceVersion: "7", Labels: endpointsLabels(svc)},
		Subsets:    subsets,
	}
}

func TestMinimalEndpointsUpdates(t *testing.T) {
	svc := newService("web")
	p1, p2 := newPod("web", 1), newPod("web", 2)

	t.Run("unchanged", func(t *testing.T) {
		f := newFixture(t, svc, p1, p2, existing(t, svc, p1, p2))
		f.mustSync("web")
		f.wantActions()
	})

	t.Run("a pod turned not ready", func(t *testing.T) {
		f := newFixture(t, svc, p1, newPod("web", 2, notReady()), existing(t, svc, p1, p2))
		f.mustSync("web")
		f.wantActions("update endpoints web")
		got := describeSubsets(f.written().Subsets)
		if want := "ready=[web-0001] notReady=[web-0002] ports=[http:8080 metrics:9100]"; !slices.Equal(got, []string{want}) {
			t.Errorf("subsets %v", got)
		}
	})

	t.Run("the cache still holds the replaced state", func(t *testing.T) {
		old := existing(t, svc, p1, p2)
		f := newFixture(t, svc, p1, old)
		f.c.stale.replacedState(old)
		if err := f.c.Sync(context.Background(), ns+"/web"); err == nil {
			t.Fatal("sync over a stale cache succeeded")
		}
		f.wantActions()
	})
}

func TestEndpointsDeletedWithService(t *testing.T) {
	svc := newService("web")
	leftover := existing(t, svc, newPod("web", 1))
	f := newFixture(t, leftover)
	f.mustSync("web")
	f.wantActions("delete endpoints web")

	f = newFixture(t)
	f.mustSync("web")
	f.wantActions()
}

func TestSelectorlessServiceLeftAlone(t *testing.T) {
	svc := newService("manual", func(s *corev1.Service) { s.Spec.Selector = nil })
	manual := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: ns, ResourceVersion: "3"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}}}}
	f := newFixture(t, svc, manual, newPod("manual", 1))
	f.mustSync("manual")
	f.wantActions()
}

// TestEndpointsEvents: an Endpoints object created or updated by someone else (here
// one without a Service) queues nothing, so it is not deleted; its deletion queues
// its key, to recreate it when its Service selects pods.
func TestEndpointsEvents(t *testing.T) {
	f := newFixture(t)
	h := f.c.endpointsHandler()
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "testservice", Namespace: ns, ResourceVersion: "3"}}
	changed := ep.DeepCopy()
	changed.ResourceVersion = "4"
	changed.Labels = map[string]string{"patched": "true"}
	h.OnAdd(ep, false)
	h.OnUpdate(ep, changed)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("create and update of an Endpoints queued %d keys, want none", n)
	}
	h.OnDelete(changed)
	if k, _ := f.c.queue.Get(); k != ns+"/testservice" {
		t.Fatalf("deletion queued %q", k)
	}
}

func TestTruncation(t *testing.T) {
	svc := newService("web", func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[1:] })

	t.Run("ready addresses first", func(t *testing.T) {
		objs := []runtime.Object{svc}
		for i := range 1100 {
			if i < 1050 {
				objs = append(objs, newPod("web", i))
			} else {
				objs = append(objs, newPod("web", i, notReady()))
			}
		}
		f := newFixture(t, objs...)
		f.mustSync("web")
		f.wantActions("create endpoints web")
		ep := f.written()
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1000 || len(ep.Subsets[0].NotReadyAddresses) != 0 {
			t.Errorf("subsets: %d, ready %d, not ready %d", len(ep.Subsets), len(ep.Subsets[0].Addresses), len(ep.Subsets[0].NotReadyAddresses))
		}
		if ep.Annotations[corev1.EndpointsOverCapacity] != "truncated" {
			t.Errorf("annotations %v", ep.Annotations)
		}
	})

	t.Run("not ready addresses share what is left", func(t *testing.T) {
		objs := []runtime.Object{svc}
		for i := range 1200 {
			if i < 900 {
				objs = append(objs, newPod("web", i))
			} else {
				objs = append(objs, newPod("web", i, notReady()))
			}
		}
		f := newFixture(t, objs...)
		f.mustSync("web")
		ep := f.written()
		if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 900 || len(ep.Subsets[0].NotReadyAddresses) != 100 {
			t.Errorf("ready %d, not ready %d", len(ep.Subsets[0].Addresses), len(ep.Subsets[0].NotReadyAddresses))
		}
		if ep.Annotations[corev1.EndpointsOverCapacity] != "truncated" {
			t.Errorf("annotations %v", ep.Annotations)
		}

		// Written once, it stays: the next sync finds nothing to change.
		written := ep.DeepCopy()
		written.ResourceVersion = "9"
		f = newFixture(t, append(objs, written)...)
		f.mustSync("web")
		f.wantActions()
	})

	t.Run("the annotation goes when back under capacity", func(t *testing.T) {
		p := newPod("web", 1)
		old := existing(t, svc, p)
		old.Annotations = map[string]string{corev1.EndpointsOverCapacity: "truncated"}
		f := newFixture(t, svc, p, old)
		f.mustSync("web")
		f.wantActions("update endpoints web")
		if _, ok := f.written().Annotations[corev1.EndpointsOverCapacity]; ok {
			t.Error("over-capacity annotation kept")
		}
	})
}

func TestTruncateProportionally(t *testing.T) {
	addrs := func(n int) []corev1.EndpointAddress { return make([]corev1.EndpointAddress, n) }
	subsets := []corev1.EndpointSubset{
		{Addresses: addrs(600)},
		{Addresses: addrs(900)},
		{NotReadyAddresses: addrs(10)},
	}
	got, cut := truncate(subsets)
	if !cut || len(got) != 2 || len(got[0].Addresses) != 400 || len(got[1].Addresses) != 600 {
		t.Errorf("cut %t, %d subsets: %d and %d addresses", cut, len(got), len(got[0].Addresses), len(got[1].Addresses))
	}
}
