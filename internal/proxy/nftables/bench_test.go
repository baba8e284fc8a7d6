package nftables

import (
	"net/netip"
	"testing"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// BenchmarkFullText10000x10 is a full sync's share in the proxy: render
// from scratch and write the nft text.
func BenchmarkFullText10000x10(b *testing.B) {
	m := iptables.SyntheticModel(10000, 10)
	b.ReportAllocs()
	for b.Loop() {
		_ = FullText(Render(m, testOptions))
	}
}

// BenchmarkOneEndpointChange10000x10 is a one-endpoint change's share in
// the proxy: render again (one Service) and diff.
func BenchmarkOneEndpointChange10000x10(b *testing.B) {
	m := iptables.SyntheticModel(10000, 10)
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
