package ingress

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWriteStatuses checks the exact API writes: served Ingresses get the
// address, one that carries exactly our address and is not served is
// cleared, other controllers' statuses are left alone.
func TestWriteStatuses(t *testing.T) {
	lb := func(ip string) networkingv1.IngressStatus {
		if ip == "" {
			return networkingv1.IngressStatus{}
		}
		return networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: ip}}}}
	}
	mk := func(name, ip string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: lb(ip)}
	}
	all := []*networkingv1.Ingress{
		mk("served-new", ""), mk("served-done", "192.0.2.10"), mk("served-stale", "198.51.100.1"),
		mk("dropped", "192.0.2.10"), mk("foreign", "198.51.100.1"), mk("never", ""),
	}
	client := fake.NewClientset()
	for _, ing := range all {
		if _, err := client.NetworkingV1().Ingresses("ns").Create(context.Background(), ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	c := &Controller{o: Options{Client: client, PublishIP: "192.0.2.10"}}
	if err := c.writeStatuses(context.Background(), all, []string{"ns/served-new", "ns/served-done", "ns/served-stale"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"served-new": "192.0.2.10", "served-stale": "192.0.2.10", "dropped": ""}
	var got []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "update" || a.GetSubresource() != "status" {
			t.Errorf("unexpected action %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
			continue
		}
		ing := a.(k8stesting.UpdateAction).GetObject().(*networkingv1.Ingress)
		got = append(got, ing.Name)
		ip := ""
		if l := ing.Status.LoadBalancer.Ingress; len(l) > 0 {
			ip = l[0].IP
		}
		if w, ok := want[ing.Name]; !ok || w != ip {
			t.Errorf("status of %s written as %q", ing.Name, ip)
		}
	}
	if len(got) != len(want) {
		t.Errorf("status writes %v, want those of %v", got, want)
	}
}
