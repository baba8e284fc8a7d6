package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/proxy/iptables"
	"github.com/kubette/kubette/internal/testenv"
)

// TestProxyAgainstAPIServer drives the proxy through a real API server and
// checks the rules a recording Runner ends up holding.
func TestProxyAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	host := newFakeHost()
	const minSync = 200 * time.Millisecond
	p := startProxy(t, env.Client, host, minSync)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })

	svcs := env.Client.CoreV1().Services("default")
	eps := env.Client.DiscoveryV1().EndpointSlices("default")
	if _, err := svcs.Create(ctx, service("web", "10.96.0.10", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Service without endpoints: REJECT in the filter table.
	eventually(t, "the REJECT of a service without endpoints", func() bool {
		return hasRule(host.rules("filter", "KUBE-SERVICES"), "-d 10.96.0.10", "--dport 80", "-j REJECT")
	})
	slice, err := eps.Create(ctx, endpointSlice("web", "web-abc", 8080, true, "10.244.1.5", "10.244.2.7"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcChain := iptables.SVCChain("default/web:http", "TCP")
	// webChainsLeft reports whether any chain of default/web is on the host
	// (the API server's own default/kubernetes Service has chains too).
	webChainsLeft := func() bool {
		saved, _ := host.Save(ctx)
		return strings.Contains(string(saved), svcChain) ||
			strings.Contains(string(saved), iptables.SEPChain("default/web:http", "TCP", "10.244.1.5:8080")) ||
			strings.Contains(string(saved), iptables.SEPChain("default/web:http", "TCP", "10.244.2.7:8080"))
	}
	eventually(t, "the ClusterIP rules", func() bool {
		return hasRule(host.rules("nat", "KUBE-SERVICES"), "-d 10.96.0.10", "--dport 80", "-j "+svcChain) &&
			len(host.rules("nat", svcChain)) == 3 && !hasRule(host.rules("filter", "KUBE-SERVICES"), "-d 10.96.0.10")
	})
	for _, ep := range []string{"10.244.1.5:8080", "10.244.2.7:8080"} {
		sep := iptables.SEPChain("default/web:http", "TCP", ep)
		if !hasRule(host.rules("nat", sep), "-j DNAT --to-destination "+ep) {
			t.Errorf("%s: %v", sep, host.rules("nat", sep))
		}
	}

	// Endpoints no longer ready: back to REJECT, the service chains go.
	f := false
	for i := range slice.Endpoints {
		slice.Endpoints[i].Conditions.Ready = &f
	}
	if slice, err = eps.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "REJECT once no endpoint is ready", func() bool {
		return hasRule(host.rules("filter", "KUBE-SERVICES"), "-d 10.96.0.10", "-j REJECT") && !webChainsLeft()
	})

	// 100 quick changes are coalesced: at most one sync per MinSyncPeriod.
	before := host.restoreCount()
	start := time.Now()
	tr := true
	slice.Endpoints = slice.Endpoints[:1]
	slice.Endpoints[0].Conditions.Ready = &tr
	for i := range 100 {
		port := int32(9000 + i)
		slice.Ports[0].Port = &port
		if slice, err = eps.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the last of 100 changes", func() bool {
		sep := iptables.SEPChain("default/web:http", "TCP", "10.244.1.5:9099")
		return hasRule(host.rules("nat", sep), "--to-destination 10.244.1.5:9099")
	})
	applies := host.restoreCount() - before
	elapsed := time.Since(start)
	if limit := int(elapsed/minSync) + 2; applies > limit {
		t.Errorf("100 changes in %v took %d applies, more than one per %v (%d)", elapsed, applies, minSync, limit)
	}
	t.Logf("100 changes in %v: %d applies", elapsed, applies)

	// Delete: everything about the Service goes (one SEP chain of web is left
	// before, the endpoint at 9099).
	sepsBefore := len(host.chainNames("nat", "KUBE-SEP-")) - 1
	if err := eps.Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no trace of the deleted service", func() bool {
		saved, _ := host.Save(ctx)
		return !strings.Contains(string(saved), "default/web") && len(host.chainNames("nat", "KUBE-SEP-")) == sepsBefore
	})

	// A headless Service and one with the service-proxy-name label get nothing.
	headless := service("db", corev1.ClusterIPNone, 5432)
	if _, err := svcs.Create(ctx, headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hs := endpointSlice("db", "db-1", 5432, true, "10.244.1.9")
	hs.Labels[corev1.IsHeadlessService] = ""
	if _, err := eps.Create(ctx, hs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := service("other", "10.96.0.11", 80)
	other.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "someone-else"}
	if _, err := svcs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	marker := service("marker", "10.96.0.12", 80) // created last: once it shows, the others were seen
	if _, err := svcs.Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the marker service", func() bool {
		return hasRule(host.rules("filter", "KUBE-SERVICES"), "default/marker:http")
	})
	saved, _ := host.Save(ctx)
	if strings.Contains(string(saved), "default/db") || strings.Contains(string(saved), "default/other") {
		t.Errorf("rules for a headless or foreign service:\n%s", saved)
	}
}
