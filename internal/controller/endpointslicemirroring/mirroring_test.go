package endpointslicemirroring

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/endpointtest"
)

const ns = endpointtest.Namespace

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	recorder *record.FakeRecorder
	c        *Controller
}

func newFixture(t *testing.T, maxPer int, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	// Name created slices as the API server does from generateName (the fake does not).
	var seq int
	client.PrependReactor("create", "endpointslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" {
			seq++
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, seq)
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	c, err := NewWithOptions(controller.Deps{Client: client, Informers: factory,
		Recorder: func(string) record.EventRecorder { return recorder }}, Options{MaxEndpointsPerSubset: maxPer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	endpointtest.Preload(t, factory, objs...)
	return &fixture{t: t, client: client, recorder: recorder, c: c}
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.c.Sync(context.Background(), ns+"/"+name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

// written returns the slices created or updated, in order.
func (f *fixture) written() []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, a := range f.client.Actions() {
		if a, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if s, ok := a.GetObject().(*discoveryv1.EndpointSlice); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// selectorless is a Service without a selector, as the conformance test creates.
func selectorless(name string) *corev1.Service {
	return endpointtest.Service(name, func(s *corev1.Service) { s.Spec.Selector = nil })
}

func endpoints(name string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-ep-uid"), ResourceVersion: "5",
			Labels: map[string]string{"app": "custom"}, Annotations: map[string]string{"note": "x", corev1.EndpointsLastChangeTriggerTime: "t"}},
		Subsets: subsets,
	}
}

func subset(port int32, ips ...string) corev1.EndpointSubset {
	s := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: port, Protocol: corev1.ProtocolTCP}}}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, corev1.EndpointAddress{IP: ip})
	}
	return s
}

// describe renders a slice as "type ports=[...] endpoints=[ip(ready)...]".
func describe(s *discoveryv1.EndpointSlice) string {
	var ports, eps []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s:%s:%d", *p.Name, *p.Protocol, *p.Port))
	}
	for _, e := range s.Endpoints {
		r := "ready"
		if !ptr.Deref(e.Conditions.Ready, false) {
			r = "notready"
		}
		eps = append(eps, e.Addresses[0]+"("+r+")")
	}
	return string(s.AddressType) + " ports=" + strings.Join(ports, ",") + " endpoints=" + strings.Join(eps, ",")
}

// TestMirrorsCustomEndpoints: the Endpoints of a Service without a selector get one
// slice per address type and port set, with their labels, annotations (without the
// trigger time), the mirroring labels and an owner reference to the Endpoints.
func TestMirrorsCustomEndpoints(t *testing.T) {
	ep := endpoints("custom", subset(80, "10.1.2.3"))
	ep.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "10.1.2.4", Hostname: "h", NodeName: ptr.To("node-a")}}
	f := newFixture(t, 0, selectorless("custom"), ep)
	f.mustSync("custom")
	endpointtest.WantWrites(t, f.client, "create endpointslices custom-*")
	s := f.written()[0]
	if got, want := describe(s), "IPv4 ports=:TCP:80 endpoints=10.1.2.3(ready),10.1.2.4(notready)"; got != want {
		t.Errorf("slice = %s, want %s", got, want)
	}
	if s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] != "custom" || s.Labels["app"] != "custom" || len(s.Labels) != 3 {
		t.Errorf("labels = %v", s.Labels)
	}
	if s.Annotations["note"] != "x" || len(s.Annotations) != 1 {
		t.Errorf("annotations = %v", s.Annotations)
	}
	ref := metav1.GetControllerOf(s)
	if ref == nil || ref.Kind != "Endpoints" || ref.APIVersion != "v1" || ref.UID != ep.UID {
		t.Errorf("controller = %+v", ref)
	}
	nr := s.Endpoints[1]
	if ptr.Deref(nr.Hostname, "") != "h" || ptr.Deref(nr.NodeName, "") != "node-a" {
		t.Errorf("not-ready endpoint = %+v", nr)
	}
}

// TestUpToDateUpdatedAndDeleted: a slice holding the Endpoints is left alone; a
// changed address rewrites it in place; once the Endpoints are gone, or the Service
// is gone or gains a selector, the mirrored slices are deleted.
func TestUpToDateUpdatedAndDeleted(t *testing.T) {
	ep := endpoints("custom", subset(80, "10.1.2.3"))
	f := newFixture(t, 0, selectorless("custom"), ep)
	f.mustSync("custom")
	mirrored := f.written()[0].DeepCopy()
	mirrored.Name, mirrored.GenerateName, mirrored.UID, mirrored.ResourceVersion = "custom-abc", "", "slice-uid", "7"

	f = newFixture(t, 0, selectorless("custom"), ep, mirrored)
	f.mustSync("custom")
	endpointtest.WantWrites(t, f.client)

	moved := endpoints("custom", subset(80, "10.2.3.4"))
	f = newFixture(t, 0, selectorless("custom"), moved, mirrored)
	f.mustSync("custom")
	endpointtest.WantWrites(t, f.client, "update endpointslices custom-abc")
	if got := describe(f.written()[0]); got != "IPv4 ports=:TCP:80 endpoints=10.2.3.4(ready)" {
		t.Errorf("updated slice = %s", got)
	}

	for name, objs := range map[string][]runtime.Object{
		"endpoints gone":  {selectorless("custom"), mirrored},
		"service gone":    {ep, mirrored},
		"service selects": {endpointtest.Service("custom"), ep, mirrored},
		"skip-mirror":     {selectorless("custom"), skipMirror(ep), mirrored},
		"leader election": {selectorless("custom"), leaderRecord(ep), mirrored},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 0, objs...)
			f.mustSync("custom")
			endpointtest.WantWrites(t, f.client, "delete endpointslices custom-abc")
		})
	}
}

func skipMirror(ep *corev1.Endpoints) *corev1.Endpoints {
	ep = ep.DeepCopy()
	ep.Labels[discoveryv1.LabelSkipMirror] = "true"
	return ep
}

func leaderRecord(ep *corev1.Endpoints) *corev1.Endpoints {
	ep = ep.DeepCopy()
	ep.Annotations["control-plane.alpha.kubernetes.io/leader"] = "{}"
	return ep
}

// TestAddressTypesRepackAndLimits: subsets are repacked (one address on two ports is
// one slice with both ports), IPv6 addresses get slices of their own, invalid IPs and
// addresses beyond the per-subset maximum (in the repacked, sorted order) are skipped
// with warning events.
func TestAddressTypesRepackAndLimits(t *testing.T) {
	ep := endpoints("custom", subset(80, "10.1.2.3"), subset(81, "10.1.2.3"), subset(90, "0bad", "10.9.9.1", "10.9.9.2", "10.9.9.3"), subset(91, "fd00::1"))
	f := newFixture(t, 2, selectorless("custom"), ep)
	f.mustSync("custom")
	var got []string
	for _, s := range f.written() {
		got = append(got, describe(s))
	}
	want := map[string]bool{
		"IPv4 ports=:TCP:80,:TCP:81 endpoints=10.1.2.3(ready)":         true,
		"IPv4 ports=:TCP:90 endpoints=10.9.9.1(ready),10.9.9.2(ready)": true,
		"IPv6 ports=:TCP:91 endpoints=fd00::1(ready)":                  true,
	}
	if len(got) != len(want) {
		t.Fatalf("slices = %q, want %d", got, len(want))
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected slice %s (all: %q)", g, got)
		}
	}
	var events []string
	for len(f.recorder.Events) > 0 {
		events = append(events, <-f.recorder.Events)
	}
	if len(events) != 2 || !strings.Contains(events[0], "InvalidIPAddress") || !strings.Contains(events[1], "TooManyAddressesToMirror") {
		t.Errorf("events = %q", events)
	}
}

// TestRecyclesSlices: a slice of ports no longer offered is rewritten for the new
// ports instead of deleted while another is created.
func TestRecyclesSlices(t *testing.T) {
	old := endpoints("custom", subset(80, "10.1.2.3"))
	f := newFixture(t, 0, selectorless("custom"), old)
	f.mustSync("custom")
	mirrored := f.written()[0].DeepCopy()
	mirrored.Name, mirrored.GenerateName, mirrored.UID, mirrored.ResourceVersion = "custom-abc", "", "slice-uid", "7"

	f = newFixture(t, 0, selectorless("custom"), endpoints("custom", subset(8080, "10.1.2.3")), mirrored)
	f.mustSync("custom")
	endpointtest.WantWrites(t, f.client, "update endpointslices custom-abc")
	if got := describe(f.written()[0]); got != "IPv4 ports=:TCP:8080 endpoints=10.1.2.3(ready)" {
		t.Errorf("recycled slice = %s", got)
	}
}

// TestOwnWritesDoNotTrigger: the watch event of a slice the controller wrote queues
// nothing; a foreign change and a foreign deletion queue the Endpoints; a cache that
// lacks the controller's own creation makes the sync wait instead of duplicating.
func TestOwnWritesDoNotTrigger(t *testing.T) {
	f := newFixture(t, 0, selectorless("custom"), endpoints("custom", subset(80, "10.1.2.3")))
	f.client.PrependReactor("create", "endpointslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice).DeepCopy()
		s.Name, s.UID, s.ResourceVersion = "custom-abc", "slice-uid", "8"
		return true, s, nil
	})
	f.mustSync("custom")
	own := f.written()[0].DeepCopy()
	own.Name, own.UID, own.ResourceVersion = "custom-abc", "slice-uid", "8"
	if err := f.c.Sync(context.Background(), ns+"/custom"); err == nil {
		t.Error("sync with a cache lacking the controller's own slice did not report a stale cache")
	}
	f.c.addSlice(own)
	if f.c.queue.Len() != 0 {
		t.Fatal("the controller's own creation queued its Endpoints")
	}
	foreign := own.DeepCopy()
	foreign.ResourceVersion = "9"
	f.c.updateSlice(own, foreign)
	if k, _ := f.c.queue.Get(); k != ns+"/custom" {
		t.Fatalf("a foreign change queued %q", k)
	}
	f.c.queue.Done(ns + "/custom")
	f.c.deleteSlice(foreign)
	if f.c.queue.Len() != 1 {
		t.Fatal("a foreign deletion did not queue the Endpoints")
	}
}

// TestEvents checks which Endpoints and Service events queue a key.
func TestEvents(t *testing.T) {
	f := newFixture(t, 0)
	c := f.c
	ep := endpoints("custom", subset(80, "10.1.2.3"))
	c.addEndpoints(skipMirror(ep)) // not mirrored
	withSel := endpointtest.Service("custom")
	c.addOrDeleteService(withSel)                // has a selector
	c.updateService(withSel, withSel.DeepCopy()) // selector unchanged
	if c.queue.Len() != 0 {
		t.Fatalf("queued %d keys, want none", c.queue.Len())
	}
	c.updateEndpoints(skipMirror(ep), ep) // no longer skipped
	if c.queue.Len() != 1 {
		t.Fatal("an Endpoints update that ends skip-mirror queued nothing")
	}
	k, _ := c.queue.Get()
	c.queue.Done(k)
	c.updateService(withSel, selectorless("custom")) // lost its selector
	if c.queue.Len() != 1 {
		t.Fatal("a Service losing its selector queued nothing")
	}
}
