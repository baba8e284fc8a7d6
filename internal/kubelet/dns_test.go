package kubelet

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodDNSByPolicy(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch corp.example\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	five := "2"
	cases := []struct {
		name       string
		policy     v1.DNSPolicy
		hostNet    bool
		clusterDNS []string
		dnsConfig  *v1.PodDNSConfig
		servers    []string
		searches   []string
		options    []string
	}{
		{name: "cluster first", policy: v1.DNSClusterFirst, clusterDNS: []string{"10.96.0.10"},
			servers: []string{"10.96.0.10"}, searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, options: []string{"ndots:5"}},
		{name: "empty policy is cluster first", clusterDNS: []string{"10.96.0.10"},
			servers: []string{"10.96.0.10"}, searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, options: []string{"ndots:5"}},
		{name: "cluster first without cluster DNS falls back to the host", policy: v1.DNSClusterFirst,
			servers: []string{"192.0.2.53"}, searches: []string{"corp.example"}, options: []string{"edns0"}},
		{name: "cluster first on the host network uses the host", policy: v1.DNSClusterFirst, hostNet: true, clusterDNS: []string{"10.96.0.10"},
			servers: []string{"192.0.2.53"}, searches: []string{"corp.example"}, options: []string{"edns0"}},
		{name: "cluster first with host net", policy: v1.DNSClusterFirstWithHostNet, hostNet: true, clusterDNS: []string{"10.96.0.10"},
			servers: []string{"10.96.0.10"}, searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, options: []string{"ndots:5"}},
		{name: "default", policy: v1.DNSDefault, clusterDNS: []string{"10.96.0.10"},
			servers: []string{"192.0.2.53"}, searches: []string{"corp.example"}, options: []string{"edns0"}},
		{name: "none", policy: v1.DNSNone, clusterDNS: []string{"10.96.0.10"},
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"198.51.100.1"}, Searches: []string{"x.example"}},
			servers:   []string{"198.51.100.1"}, searches: []string{"x.example"}},
		{name: "dnsConfig overrides ndots", policy: v1.DNSClusterFirst, clusterDNS: []string{"10.96.0.10"},
			dnsConfig: &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &five}}},
			servers:   []string{"10.96.0.10"}, searches: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, options: []string{"ndots:2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"},
				Spec: v1.PodSpec{DNSPolicy: c.policy, HostNetwork: c.hostNet, DNSConfig: c.dnsConfig}}
			d, err := podDNS(pod, resolv, c.clusterDNS, "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.Servers, c.servers) || !slices.Equal(d.Searches, c.searches) || !slices.Equal(d.Options, c.options) {
				t.Errorf("podDNS = servers %v searches %v options %v, want %v %v %v", d.Servers, d.Searches, d.Options, c.servers, c.searches, c.options)
			}
		})
	}
}
