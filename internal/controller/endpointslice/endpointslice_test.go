package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/controller/endpointtest"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

// now is the time of the pods' readiness transitions in every unit test.
var now = endpointtest.Now()

const ns = endpointtest.Namespace

type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	c       *Controller
}

// newFixture builds a controller over a fake clientset holding objs, with the
// informer indexers preloaded with the same objects. Created slices get names
// "<generateName>00001", ... and UIDs, as the API server would give.
func newFixture(t *testing.T, maxPerSlice int, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	var seq atomic.Int64
	client.PrependReactor("create", "endpointslices", func(a core.Action) (bool, runtime.Object, error) {
		s := a.(core.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" && s.GenerateName != "" {
			n := seq.Add(1)
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
			s.UID = types.UID(fmt.Sprintf("slice-uid-%d", n))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewWithOptions(controller.Deps{Client: client, Informers: factory}, Options{MaxEndpointsPerSlice: maxPerSlice})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	endpointtest.Preload(t, factory, objs...)
	return &fixture{t: t, client: client, factory: factory, c: c}
}

func (f *fixture) sync(name string) error {
	f.t.Helper()
	return f.c.Sync(context.Background(), ns+"/"+name)
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

// written returns the slices the controller created or updated, in order.
func (f *fixture) written() []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, a := range f.client.Actions() {
		switch a := a.(type) {
		case core.CreateAction:
			if s, ok := a.GetObject().(*discoveryv1.EndpointSlice); ok {
				out = append(out, s)
			}
		case core.UpdateAction:
			if s, ok := a.GetObject().(*discoveryv1.EndpointSlice); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func (f *fixture) wantActions(want ...string) {
	f.t.Helper()
	endpointtest.WantWrites(f.t, f.client, want...)
}

type svcOpt = endpointtest.ServiceOption

func newService(name string, opts ...svcOpt) *corev1.Service {
	return endpointtest.Service(name, opts...)
}

type podOpt = endpointtest.PodOption

// newPod returns a running, ready pod of app numbered n (see endpointtest.Pod).
func newPod(app string, n int, opts ...podOpt) *corev1.Pod {
	return endpointtest.Pod(fmt.Sprintf("%s-%03d", app, n), app, n, opts...)
}

func notReady() podOpt    { return endpointtest.NotReady() }
func terminating() podOpt { return endpointtest.Terminating() }

func httpPort(port int32) podOpt { return endpointtest.HTTPPort(port) }

func newNode(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
}

// endpointsOf renders a slice's endpoints as "pod:ready/serving/terminating".
func endpointsOf(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range s.Endpoints {
		c := e.Conditions
		out = append(out, fmt.Sprintf("%s:%t/%t/%t", e.TargetRef.Name, *c.Ready, *c.Serving, *c.Terminating))
	}
	return out
}

// portsOf renders a slice's ports as "name=port".
func portsOf(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, p := range s.Ports {
		out = append(out, fmt.Sprintf("%s=%d", *p.Name, *p.Port))
	}
	return out
}

func TestSliceForServiceWithReadyPods(t *testing.T) {
	svc := newService("web")
	f := newFixture(t, 0, svc, newNode("node-a", "zone-1"), newPod("web", 1), newPod("web", 2), newPod("web", 3), newPod("other", 4))
	f.mustSync("web")
	f.wantActions("create endpointslices web-*")
	s := f.written()[0]
	if s.GenerateName != "web-" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("generateName %q addressType %q", s.GenerateName, s.AddressType)
	}
	wantLabels := map[string]string{"team": "web", discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: ControllerName}
	if !equalMaps(s.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", s.Labels, wantLabels)
	}
	ref := metav1.GetControllerOf(s)
	if ref == nil || ref.Kind != "Service" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != svc.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("owner reference %+v", ref)
	}
	if got, want := portsOf(s), []string{"http=8080", "metrics=9100"}; !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	if got, want := endpointsOf(s), []string{"web-001:true/true/false", "web-002:true/true/false", "web-003:true/true/false"}; !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
	e := s.Endpoints[0]
	if !slices.Equal(e.Addresses, []string{"10.1.0.2"}) || ptr.Deref(e.NodeName, "") != "node-a" || ptr.Deref(e.Zone, "") != "zone-1" ||
		*e.TargetRef != (corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-001", UID: "web-001-uid"}) {
		t.Errorf("endpoint %+v (target %+v)", e, e.TargetRef)
	}
	if got := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; got != now.Add(-time.Hour).Format(time.RFC3339Nano) {
		t.Errorf("trigger time %q, want the Service's creation", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestNamedPortsResolvedPerPod(t *testing.T) {
	f := newFixture(t, 0, newService("web"), newNode("node-a", "zone-1"),
		newPod("web", 1), newPod("web", 2, httpPort(9000)), newPod("web", 3),
		// No port named http: the pod gets only the numeric port.
		newPod("web", 4, func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil }),
		// A named port of another protocol does not match.
		newPod("web", 5, func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP }),
		// A sidecar's port counts.
		newPod("web", 6, func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = nil
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}}}}
		}),
	)
	f.mustSync("web")
	f.wantActions("create endpointslices web-*", "create endpointslices web-*", "create endpointslices web-*", "create endpointslices web-*")
	got := map[string][]string{}
	for _, s := range f.written() {
		got[strings.Join(portsOf(s), ",")] = endpointsOf(s)
	}
	want := map[string][]string{
		"http=8080,metrics=9100":  {"web-001:true/true/false", "web-003:true/true/false"},
		"http=9000,metrics=9100":  {"web-002:true/true/false"},
		"metrics=9100":            {"web-004:true/true/false", "web-005:true/true/false"},
		"http=15000,metrics=9100": {"web-006:true/true/false"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("slices by ports:\n%v\nwant\n%v", got, want)
	}
}

func TestSplitsAtMaxEndpointsPerSlice(t *testing.T) {
	objs := []runtime.Object{newService("web"), newNode("node-a", "zone-1")}
	for i := range 250 {
		objs = append(objs, newPod("web", i))
	}
	f := newFixture(t, 0, objs...)
	f.mustSync("web")
	f.wantActions("create endpointslices web-*", "create endpointslices web-*", "create endpointslices web-*")
	var sizes []int
	for _, s := range f.written() {
		sizes = append(sizes, len(s.Endpoints))
	}
	if !slices.Equal(sizes, []int{100, 100, 50}) {
		t.Errorf("slice sizes %v", sizes)
	}

	t.Run("a custom maximum", func(t *testing.T) {
		f := newFixture(t, 7, newService("web"), newNode("node-a", "zone-1"),
			newPod("web", 1), newPod("web", 2), newPod("web", 3), newPod("web", 4), newPod("web", 5), newPod("web", 6), newPod("web", 7), newPod("web", 8))
		f.mustSync("web")
		f.wantActions("create endpointslices web-*", "create endpointslices web-*")
	})
}

func TestEndpointConditions(t *testing.T) {
	pods := []runtime.Object{
		newPod("web", 1),
		newPod("web", 2, notReady()),
		newPod("web", 3, terminating()),
		newPod("web", 4, terminating(), notReady()),
		newPod("web", 5, func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }),
		newPod("web", 6, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		newPod("web", 7, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		newPod("web", 8, func(p *corev1.Pod) { p.Status.Conditions = nil }),
	}
	for _, tc := range []struct {
		name    string
		publish bool
		want    []string
	}{
		{"ready, not ready and terminating", false, []string{
			"web-001:true/true/false", "web-002:false/false/false", "web-003:false/true/true",
			"web-004:false/false/true", "web-008:false/false/false",
		}},
		{"publishNotReadyAddresses", true, []string{
			"web-001:true/true/false", "web-002:true/true/false", "web-003:true/true/true",
			"web-004:true/true/true", "web-008:true/true/false",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService("web", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = tc.publish })
			f := newFixture(t, 0, append([]runtime.Object{svc, newNode("node-a", "zone-1")}, pods...)...)
			f.mustSync("web")
			f.wantActions("create endpointslices web-*")
			if got := endpointsOf(f.written()[0]); !slices.Equal(got, tc.want) {
				t.Errorf("endpoints\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

// existingSlice is a managed slice of svc as the controller would have
// written it for pods, with the given name.
func existingSlice(t *testing.T, name string, svc *corev1.Service, pods ...*corev1.Pod) *discoveryv1.EndpointSlice {
	t.Helper()
	s := newSlice(svc, endpointPorts(svc, newPod(svc.Spec.Selector["app"], 0)), discoveryv1.AddressTypeIPv4)
	s.Name, s.UID, s.ResourceVersion = name, types.UID(name+"-uid"), "5"
	node := newNode("node-a", "zone-1")
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, *podToEndpoint(p, node, svc, discoveryv1.AddressTypeIPv4))
	}
	return s
}

func TestMinimalUpdates(t *testing.T) {
	svc := newService("web")
	p1, p2, p3 := newPod("web", 1), newPod("web", 2), newPod("web", 3)
	node := newNode("node-a", "zone-1")

	t.Run("nothing changed", func(t *testing.T) {
		f := newFixture(t, 0, svc, node, p1, p2, p3, existingSlice(t, "web-abc", svc, p1, p2, p3))
		f.mustSync("web")
		f.wantActions()
	})

	t.Run("a pod turned not ready", func(t *testing.T) {
		f := newFixture(t, 0, svc, node, p1, newPod("web", 2, notReady()), p3, existingSlice(t, "web-abc", svc, p1, p2, p3))
		f.mustSync("web")
		f.wantActions("update endpointslices web-abc")
		if got, want := endpointsOf(f.written()[0]), []string{"web-001:true/true/false", "web-002:false/false/false", "web-003:true/true/false"}; !slices.Equal(got, want) {
			t.Errorf("endpoints %v, want %v", got, want)
		}
	})

	t.Run("a new pod fills the slice with room rather than a new one", func(t *testing.T) {
		f := newFixture(t, 3, svc, node, p1, p2, p3, newPod("web", 4),
			existingSlice(t, "web-full", svc, p1, p2, p3), existingSlice(t, "web-room", svc))
		f.mustSync("web")
		// The empty slice is deleted... unless reused: it is the one with room.
		f.wantActions("update endpointslices web-room")
		if got := endpointsOf(f.written()[0]); !slices.Equal(got, []string{"web-004:true/true/false"}) {
			t.Errorf("endpoints %v", got)
		}
	})

	t.Run("new pods all go into one slice that takes them", func(t *testing.T) {
		p4, p5, p6 := newPod("web", 4), newPod("web", 5), newPod("web", 6)
		f := newFixture(t, 4, svc, node, p1, p2, p3, p4, p5, p6,
			existingSlice(t, "web-a", svc, p1, p2, p3), existingSlice(t, "web-b", svc, p4))
		f.mustSync("web")
		f.wantActions("update endpointslices web-b")
		if got := len(f.written()[0].Endpoints); got != 3 {
			t.Errorf("%d endpoints", got)
		}
	})

	t.Run("new pods fill slices with room before new ones are created", func(t *testing.T) {
		p4, p5, p6, p7, p8 := newPod("web", 4), newPod("web", 5), newPod("web", 6), newPod("web", 7), newPod("web", 8)
		f := newFixture(t, 4, svc, node, p1, p2, p3, p4, p5, p6, p7, p8,
			existingSlice(t, "web-a", svc, p1, p2, p3), existingSlice(t, "web-b", svc, p4, p5, p6))
		f.mustSync("web")
		f.wantActions("update endpointslices web-a", "update endpointslices web-b")
		for _, s := range f.written() {
			if len(s.Endpoints) != 4 {
				t.Errorf("slice %s has %d endpoints", s.Name, len(s.Endpoints))
			}
		}
	})

	t.Run("new pods go into the slice being updated", func(t *testing.T) {
		f := newFixture(t, 0, svc, node, p1, newPod("web", 2, notReady()), p3, newPod("web", 4),
			existingSlice(t, "web-abc", svc, p1, p2, p3))
		f.mustSync("web")
		f.wantActions("update endpointslices web-abc")
		if got := len(f.written()[0].Endpoints); got != 4 {
			t.Errorf("%d endpoints", got)
		}
	})

	t.Run("Service labels reach the slices", func(t *testing.T) {
		relabelled := newService("web", func(s *corev1.Service) { s.Labels = map[string]string{"team": "api"} })
		f := newFixture(t, 0, relabelled, node, p1, existingSlice(t, "web-abc", svc, p1))
		f.mustSync("web")
		f.wantActions("update endpointslices web-abc")
		if got := f.written()[0].Labels["team"]; got != "api" {
			t.Errorf("label team=%q", got)
		}
	})
}

func TestStaleSlicesDeleted(t *testing.T) {
	svc := newService("web")
	p1, p2, p3 := newPod("web", 1), newPod("web", 2), newPod("web", 3)
	node := newNode("node-a", "zone-1")

	t.Run("a slice whose pods are gone", func(t *testing.T) {
		f := newFixture(t, 2, svc, node, p1, p2, existingSlice(t, "web-a", svc, p1, p2), existingSlice(t, "web-b", svc, p3))
		f.mustSync("web")
		f.wantActions("delete endpointslices web-b")
	})

	t.Run("a slice of another address type", func(t *testing.T) {
		v6 := existingSlice(t, "web-v6", svc)
		v6.AddressType = discoveryv1.AddressTypeIPv6
		v6.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}
		f := newFixture(t, 0, svc, node, p1, existingSlice(t, "web-a", svc, p1), v6)
		f.mustSync("web")
		f.wantActions("delete endpointslices web-v6")
	})

	t.Run("a slice of another owner", func(t *testing.T) {
		foreign := existingSlice(t, "web-old", svc, p1)
		foreign.OwnerReferences[0].UID = "previous-web-uid"
		f := newFixture(t, 0, svc, node, p1, existingSlice(t, "web-a", svc, p1), foreign)
		f.mustSync("web")
		f.wantActions("delete endpointslices web-old")
	})

	t.Run("an old slice is rewritten rather than replaced", func(t *testing.T) {
		// The Service's target port changed: the old slice's port mapping
		// is gone and a new one is needed.
		changed := newService("web", func(s *corev1.Service) { s.Spec.Ports[1].TargetPort = intstr.FromInt32(9200) })
		f := newFixture(t, 0, changed, node, p1, p2, existingSlice(t, "web-a", svc, p1, p2))
		f.mustSync("web")
		f.wantActions("update endpointslices web-a")
		if got := portsOf(f.written()[0]); !slices.Equal(got, []string{"http=8080", "metrics=9200"}) {
			t.Errorf("ports %v", got)
		}
	})

	t.Run("the placeholder is reused for the first endpoints", func(t *testing.T) {
		f := newFixture(t, 0, svc, node)
		f.mustSync("web")
		ph := f.written()[0].DeepCopy()
		ph.Name, ph.UID, ph.ResourceVersion = "web-ph", "ph-uid", "3"
		f = newFixture(t, 0, svc, node, ph, p1)
		f.mustSync("web")
		f.wantActions("update endpointslices web-ph")
		if got := portsOf(f.written()[0]); len(got) != 2 || len(f.written()[0].Endpoints) != 1 {
			t.Errorf("slice ports %v endpoints %d", got, len(f.written()[0].Endpoints))
		}
	})

	t.Run("no endpoints leave one placeholder", func(t *testing.T) {
		f := newFixture(t, 0, svc, node, existingSlice(t, "web-a", svc, p1), existingSlice(t, "web-b", svc, p2))
		f.mustSync("web")
		f.wantActions("update endpointslices web-a", "delete endpointslices web-b")
		if s := f.written()[0]; len(s.Endpoints) != 0 || len(s.Ports) != 0 {
			t.Errorf("placeholder %+v", s)
		}
	})

	t.Run("a placeholder is created and then kept", func(t *testing.T) {
		f := newFixture(t, 0, svc, node)
		f.mustSync("web")
		f.wantActions("create endpointslices web-*")
		ph := f.written()[0].DeepCopy()
		ph.Name, ph.UID, ph.ResourceVersion = "web-ph", "ph-uid", "3"
		f = newFixture(t, 0, svc, node, ph)
		f.mustSync("web")
		f.wantActions()
	})
}

func TestLeftAlone(t *testing.T) {
	noSelector := newService("manual", func(s *corev1.Service) { s.Spec.Selector = nil })
	external := newService("ext", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName })
	f := newFixture(t, 0, noSelector, external, newNode("node-a", "zone-1"), newPod("manual", 1), newPod("ext", 1))
	for _, name := range []string{"manual", "ext", "gone"} {
		f.mustSync(name)
	}
	f.wantActions()
}

func TestHeadlessService(t *testing.T) {
	svc := newService("db", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.Ports = nil
	})
	pod := newPod("db", 1, func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db" })
	f := newFixture(t, 0, svc, newNode("node-a", "zone-1"), pod)
	f.mustSync("db")
	f.wantActions("create endpointslices db-*")
	s := f.written()[0]
	if _, ok := s.Labels[corev1.IsHeadlessService]; !ok || len(s.Ports) != 0 || len(s.Endpoints) != 1 || ptr.Deref(s.Endpoints[0].Hostname, "") != "db-0" {
		t.Errorf("slice %+v", s)
	}
}

func TestMissingNodeSkipsPodAndRetries(t *testing.T) {
	f := newFixture(t, 0, newService("web"), newNode("node-a", "zone-1"), newPod("web", 1),
		newPod("web", 2, func(p *corev1.Pod) { p.Spec.NodeName = "node-gone" }))
	err := f.sync("web")
	if err == nil || !strings.Contains(err.Error(), "node-gone") {
		t.Fatalf("sync error %v, want one naming the missing node", err)
	}
	f.wantActions("create endpointslices web-*")
	if got := endpointsOf(f.written()[0]); !slices.Equal(got, []string{"web-001:true/true/false"}) {
		t.Errorf("endpoints %v", got)
	}
}

func TestStaleCacheNeverDuplicates(t *testing.T) {
	svc := newService("web")
	f := newFixture(t, 0, svc, newNode("node-a", "zone-1"), newPod("web", 1))
	f.mustSync("web")
	f.wantActions("create endpointslices web-*")
	f.client.ClearActions()
	// The cache has not seen the created slice yet: a second sync must not
	// create another.
	err := f.sync("web")
	var stale errStaleCache
	if !errors.As(err, &stale) {
		t.Fatalf("second sync: %v, want a stale cache error", err)
	}
	f.wantActions()

	// Once the cache has it, the sync is a no-op.
	list, err := f.client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("slices %v, %v", list, err)
	}
	created := &list.Items[0]
	if err := f.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer().Add(created); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	f.wantActions()

	// Its own write does not trigger a sync; a newer foreign change does.
	if f.c.tracker.ShouldSync(created) {
		t.Error("own write would trigger a sync")
	}
	changed := created.DeepCopy()
	changed.ResourceVersion = "99"
	if !f.c.tracker.ShouldSync(changed) {
		t.Error("a foreign change would not trigger a sync")
	}
}
