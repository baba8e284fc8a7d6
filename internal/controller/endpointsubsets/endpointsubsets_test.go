package endpointsubsets

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func addr(ip string) corev1.EndpointAddress { return corev1.EndpointAddress{IP: ip} }

func TestRepack(t *testing.T) {
	pod := &corev1.ObjectReference{Kind: "Pod", Name: "p", UID: types.UID("u")}
	in := []corev1.EndpointSubset{
		// One address on two ports, given as two subsets: one subset with both ports.
		{Addresses: []corev1.EndpointAddress{addr("10.0.0.2"), addr("10.0.0.1")}, Ports: []corev1.EndpointPort{port("b", 81)}},
		{Addresses: []corev1.EndpointAddress{addr("10.0.0.1"), addr("10.0.0.2")}, Ports: []corev1.EndpointPort{port("a", 80)}},
		// An address seen ready and not ready for one port stays not ready, as upstream;
		// the same IP with a target is another address.
		{Addresses: []corev1.EndpointAddress{addr("10.0.0.9")}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.9", TargetRef: pod}}, Ports: []corev1.EndpointPort{port("c", 90)}},
		{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.9")}, Ports: []corev1.EndpointPort{port("c", 90)}},
	}
	got := Repack(in)
	want := []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{addr("10.0.0.1"), addr("10.0.0.2")}, Ports: []corev1.EndpointPort{port("a", 80), port("b", 81)}},
		{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.9"), {IP: "10.0.0.9", TargetRef: pod}}, Ports: []corev1.EndpointPort{port("c", 90)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Repack:\n got %+v\nwant %+v", got, want)
	}
	// Without ports: the addresses, no ports.
	if got := Repack([]corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{addr("10.0.0.1")}}}); len(got) != 1 || got[0].Ports != nil || len(got[0].Addresses) != 1 {
		t.Errorf("Repack without ports = %+v", got)
	}
	if got := Repack(nil); len(got) != 0 {
		t.Errorf("Repack(nil) = %+v", got)
	}
}
