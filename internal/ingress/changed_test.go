package ingress

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kubette/kubette/internal/ingress/nginx"
)

func TestChangedOwners(t *testing.T) {
	base := nginx.Config{Prefix: "/p", HTTPPort: 80, HTTPSPort: 443,
		Upstreams: []nginx.Upstream{{Name: "ns_a_80", Servers: []string{"10.0.0.1:80"}}, {Name: "ns_b_80", Servers: []string{"10.0.0.2:80"}}},
		Servers: []nginx.Server{
			{Host: "a.example", Locations: []nginx.Location{{Match: nginx.MatchPrefix, Path: "/", Owner: "ns/one", Upstream: "ns_a_80"}}},
			{Host: "b.example", Locations: []nginx.Location{
				{Match: nginx.MatchPrefix, Path: "/x/", Owner: "ns/two", Upstream: "ns_b_80"},
				{Match: nginx.MatchPrefix, Path: "/y/", Owner: "ns/three", Upstream: "ns_a_80"},
			}},
		}}
	old := nginx.Render(base)
	if got := changedOwners(old, old); len(got) != 0 {
		t.Errorf("same configuration: %v", got)
	}
	// An endpoint of upstream a: the Ingresses proxying to it.
	c := base
	c.Upstreams = []nginx.Upstream{{Name: "ns_a_80", Servers: []string{"10.0.0.9:80"}}, base.Upstreams[1]}
	if got, want := changedOwners(old, nginx.Render(c)), []string{"ns/one", "ns/three"}; !slices.Equal(got, want) {
		t.Errorf("endpoint change: %v, want %v", got, want)
	}
	// A location's setting.
	c = base
	c.Servers = slices.Clone(base.Servers)
	c.Servers[1].Locations = slices.Clone(base.Servers[1].Locations)
	c.Servers[1].Locations[0].BodySize = "8m"
	if got, want := changedOwners(old, nginx.Render(c)), []string{"ns/two"}; !slices.Equal(got, want) {
		t.Errorf("location change: %v, want %v", got, want)
	}
	// A new Ingress's host.
	c = base
	c.Servers = append(slices.Clone(base.Servers), nginx.Server{Host: "c.example",
		Locations: []nginx.Location{{Match: nginx.MatchExact, Path: "/c", Owner: "ns/four", Status: 503}}})
	if got, want := changedOwners(old, nginx.Render(c)), []string{"ns/four"}; !slices.Equal(got, want) {
		t.Errorf("new Ingress: %v, want %v", got, want)
	}
	// A removed one.
	if got, want := changedOwners(nginx.Render(c), old), []string{"ns/four"}; !slices.Equal(got, want) {
		t.Errorf("removed Ingress: %v, want %v", got, want)
	}
}

// BenchmarkChangedOwners compares two configurations of 1000 Ingresses.
func BenchmarkChangedOwners(b *testing.B) {
	c := nginx.Config{Prefix: "/p", HTTPPort: 80, HTTPSPort: 443, Upstreams: []nginx.Upstream{{Name: "ns_a_80", Servers: []string{"10.0.0.1:80"}}}}
	for i := range 1000 {
		c.Servers = append(c.Servers, nginx.Server{Host: fmt.Sprintf("h%d.example", i),
			Locations: []nginx.Location{{Match: nginx.MatchPrefix, Path: "/", Owner: fmt.Sprintf("ns/i%d", i), Upstream: "ns_a_80"}}})
	}
	old := nginx.Render(c)
	c.Servers = c.Servers[1:]
	cur := nginx.Render(c)
	b.ResetTimer()
	for b.Loop() {
		if got := changedOwners(old, cur); len(got) != 1 {
			b.Fatal(got)
		}
	}
}
