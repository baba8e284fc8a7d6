package proxy

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func BenchmarkBuildModel10000x10(b *testing.B) {
	var svcs []*corev1.Service
	var slices []*discoveryv1.EndpointSlice
	for i := range 10000 {
		name := fmt.Sprintf("svc-%05d", i)
		svcs = append(svcs, service(name, fmt.Sprintf("10.96.%d.%d", i>>8&255, i&255), 80))
		var ips []string
		for j := range 10 {
			k := i*10 + j
			ips = append(ips, fmt.Sprintf("10.244.%d.%d", k>>8&255, k&255))
		}
		slices = append(slices, endpointSlice(name, name+"-abc", 8080, true, ips...))
	}
	b.ReportAllocs()
	for b.Loop() {
		buildModel(svcs, slices)
	}
}

func BenchmarkCachedModel10000x10(b *testing.B) {
	var svcs []*corev1.Service
	var slices []*discoveryv1.EndpointSlice
	for i := range 10000 {
		name := fmt.Sprintf("svc-%05d", i)
		svcs = append(svcs, service(name, fmt.Sprintf("10.96.%d.%d", i>>8&255, i&255), 80))
		slices = append(slices, endpointSlice(name, name+"-abc", 8080, true, "10.244.0.1", "10.244.0.2"))
	}
	var c modelCache
	c.build(svcs, slices)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		slices[i%10000] = slices[i%10000].DeepCopy() // one changed object
		c.build(svcs, slices)
	}
}
