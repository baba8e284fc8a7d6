package iptables

import (
	"net/netip"
	"testing"
)

func BenchmarkRender10000x10(b *testing.B) {
	m := SyntheticModel(10000, 10)
	b.ReportAllocs()
	for b.Loop() {
		Render(m, testOptions)
	}
}

func BenchmarkUpdate10000x10(b *testing.B) {
	m := SyntheticModel(10000, 10)
	prev := Render(m, testOptions)
	m.Services[5].Ports[0].Endpoints[0].IP = netip.MustParseAddr("10.245.0.1")
	next := Render(m, testOptions)
	b.ReportAllocs()
	for b.Loop() {
		UpdateBatches(prev, next, 1000)
	}
}

func BenchmarkRerenderOneChange10000x10(b *testing.B) {
	m := SyntheticModel(10000, 10)
	r := NewRenderer()
	prev := r.Render(m, testOptions)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		m.Services[i%10000].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)})
		next := r.Render(m, testOptions)
		if UpdateBatches(prev, next, 1000) == nil {
			b.Fatal("no update")
		}
		prev = next
	}
}

func BenchmarkRerenderNoChange10000x10(b *testing.B) {
	m := SyntheticModel(10000, 10)
	r := NewRenderer()
	prev := r.Render(m, testOptions)
	b.ReportAllocs()
	for b.Loop() {
		next := r.Render(m, testOptions)
		if UpdateBatches(prev, next, 1000) != nil {
			b.Fatal("update")
		}
		prev = next
	}
}

// BenchmarkFullSyncUnchanged10000x10 is a restarted proxy's comparison of a
// freshly rendered ruleset with the saved tables that hold it already.
func BenchmarkFullSyncUnchanged10000x10(b *testing.B) {
	m := SyntheticModel(10000, 10)
	var text []byte
	rs := Render(m, testOptions)
	for _, tn := range []string{TableFilter, TableNAT} {
		text = append(text, "*"+tn+"\n"...)
		for _, c := range rs.Table(tn) {
			text = append(text, ":"+c.Name+" - [0:0]\n"...)
		}
		for _, c := range rs.Table(tn) {
			for _, r := range c.Rules {
				f, _ := SaveForm(r)
				text = append(text, "-A "+c.Name+" "+f+"\n"...)
			}
		}
		text = append(text, "COMMIT\n"...)
	}
	b.ReportAllocs()
	for b.Loop() {
		saved, err := ParseSave(text)
		if err != nil {
			b.Fatal(err)
		}
		if batches, _ := Render(m, testOptions).FullSyncBatches(saved, 500); batches != nil {
			b.Fatal("unchanged ruleset gave batches")
		}
	}
}
