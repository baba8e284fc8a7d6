package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// benchModel is bench/proxy's model: n Services × e ready endpoints.
func benchModel(n, e int) iptables.Model {
	m := iptables.Model{Services: make([]iptables.Service, n)}
	for i := range n {
		s := iptables.Service{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i),
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}}
		p := iptables.Port{Name: "http", Protocol: "TCP", Port: 80}
		for j := range e {
			k := i*e + j
			p.Endpoints = append(p.Endpoints, iptables.Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, byte(k >> 8), byte(k)}), Port: 8080, Ready: true, Serving: true})
		}
		s.Ports = []iptables.Port{p}
		m.Services[i] = s
	}
	return m
}

// BenchmarkFullText10000x10 is a full sync's share in the proxy: render
// from scratch and write the nft text.
func BenchmarkFullText10000x10(b *testing.B) {
	m := benchModel(10000, 10)
	b.ReportAllocs()
	for b.Loop() {
		_ = FullText(Render(m, testOptions))
	}
}

// BenchmarkOneEndpointChange10000x10 is a one-endpoint change's share in
// the proxy: render again (one Service) and diff.
func BenchmarkOneEndpointChange10000x10(b *testing.B) {
	m := benchModel(10000, 10)
	rd := NewRenderer()
	prev := rd.Render(m, testOptions)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		k++
		m.Services[k%10000].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, byte(k >> 8), byte(k)})
		next := rd.Render(m, testOptions)
		if text, ok := UpdateText(prev, next); !ok || len(text) == 0 {
			b.Fatal("no update")
		}
		prev = next
	}
}
