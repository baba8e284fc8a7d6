package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// drain returns the Events a FakeRecorder holds.
func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestRulesSyncedEventsOnlyForChangedServices(t *testing.T) {
	p, err := New(Options{Client: fake.NewClientset(), NodeName: "n1", ServiceCIDR: "10.96.0.0/12", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	p.events.recorder = rec
	ctx := context.Background()
	old := service("old", "10.96.0.10", 53)
	p.models.build([]*corev1.Service{old}, nil)
	p.reportSynced(ctx)
	if got := drain(rec); len(got) != 0 {
		t.Fatalf("first sync (a baseline) reported %v", got)
	}

	web := service("web", "10.96.0.20", 80)
	slice := endpointSlice("web", "web-abc", 8080, true, "10.244.0.4", "10.244.0.5")
	p.models.build([]*corev1.Service{old, web}, []*discoveryv1.EndpointSlice{slice})
	p.reportSynced(ctx)
	want := "Normal RulesSynced Synced iptables rules on node n1: 10.96.0.20:80/TCP → 2 ready endpoints"
	if got := drain(rec); len(got) != 1 || got[0] != want {
		t.Fatalf("new Service: events %q, want [%q]", got, want)
	}

	// A change that touches no rule (a label) is not reported; nor is an unchanged Service.
	relabelled := web.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "front"}
	p.models.build([]*corev1.Service{old, relabelled}, []*discoveryv1.EndpointSlice{slice})
	p.reportSynced(ctx)
	if got := drain(rec); len(got) != 0 {
		t.Fatalf("label change reported %v", got)
	}

	// An endpoint that stops being ready changes the rules.
	slice2 := endpointSlice("web", "web-abc", 8080, true, "10.244.0.4")
	notReady := endpointSlice("web", "web-abd", 8080, false, "10.244.0.5")
	p.models.build([]*corev1.Service{old, relabelled}, []*discoveryv1.EndpointSlice{slice2, notReady})
	p.reportSynced(ctx)
	want = "Normal RulesSynced Synced iptables rules on node n1: 10.96.0.20:80/TCP → 1 ready endpoint, 1 not ready"
	if got := drain(rec); len(got) != 1 || got[0] != want {
		t.Fatalf("endpoint change: events %q, want [%q]", got, want)
	}
}

func TestRulesSyncedEventsCapped(t *testing.T) {
	p, err := New(Options{Client: fake.NewClientset(), ServiceCIDR: "10.96.0.0/12", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(1000)
	p.events.recorder = rec
	p.models.build(nil, nil)
	p.reportSynced(context.Background())
	var svcs []*corev1.Service
	for i := range 2 * maxSyncEvents {
		svcs = append(svcs, service("s"+strings.Repeat("x", i), "10.96.1.1", 80))
	}
	p.models.build(svcs, nil)
	p.reportSynced(context.Background())
	if got := drain(rec); len(got) != maxSyncEvents || !strings.Contains(got[0], "no ready endpoint") {
		t.Fatalf("%d events (first %q), want %d", len(got), got[0], maxSyncEvents)
	}
}

// TestRulesSyncedEventReachesTheAPI runs the proxy over a fake host and checks that a
// new Service gets its Event through the API (source kube-proxy, host n1).
func TestRulesSyncedEventReachesTheAPI(t *testing.T) {
	client := fake.NewClientset()
	host := newFakeHost()
	p := startProxy(t, client, host, time.Millisecond)
	eventually(t, "the first sync", func() bool { return p.Stats().Restores > 0 })
	ctx := context.Background()
	if _, err := client.CoreV1().Services("default").Create(ctx, service("web", "10.96.0.20", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, endpointSlice("web", "web-abc", 8080, true, "10.244.0.4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a RulesSynced Event with the endpoint", func() bool {
		list, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == ReasonRulesSynced && e.InvolvedObject.Name == "web" && e.Source.Component == "kube-proxy" && e.Source.Host == "n1" &&
				strings.HasSuffix(e.Message, "1 ready endpoint") {
				return true
			}
		}
		return false
	})
}
