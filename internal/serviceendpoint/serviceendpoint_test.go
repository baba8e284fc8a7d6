package serviceendpoint

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func slice(svc, portName string, proto corev1.Protocol, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	p := discoveryv1.EndpointPort{Port: ptr.To(port), Protocol: ptr.To(proto)}
	if portName != "" {
		p.Name = ptr.To(portName)
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		Ports:      []discoveryv1.EndpointPort{p}, Endpoints: eps,
	}
}

func ep(addr string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func TestPick(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}, {Port: 8443}}}}
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		port   int32
		want   string
		err    error
	}{
		{name: "named port, ready endpoint", svc: svc, port: 443,
			slices: []*discoveryv1.EndpointSlice{slice("web", "https", corev1.ProtocolTCP, 9443, ep("10.0.0.1", nil), ep("10.0.0.2", ptr.To(false)))},
			want:   "10.0.0.1:9443"},
		{name: "another Service's slice is ignored", svc: svc, port: 443,
			slices: []*discoveryv1.EndpointSlice{slice("db", "https", corev1.ProtocolTCP, 9443, ep("10.0.0.9", nil))},
			err:    ErrNoEndpoints},
		{name: "a UDP port does not serve https", svc: svc, port: 443,
			slices: []*discoveryv1.EndpointSlice{slice("web", "https", corev1.ProtocolUDP, 9443, ep("10.0.0.1", nil))},
			err:    ErrNoEndpoints},
		{name: "unnamed port matches the unnamed slice port", svc: svc, port: 8443,
			slices: []*discoveryv1.EndpointSlice{slice("web", "https", corev1.ProtocolTCP, 1, ep("10.0.0.1", nil)), slice("web", "", corev1.ProtocolTCP, 7443, ep("10.0.0.3", nil))},
			want:   "10.0.0.3:7443"},
		{name: "only unready endpoints", svc: svc, port: 443,
			slices: []*discoveryv1.EndpointSlice{slice("web", "https", corev1.ProtocolTCP, 9443, ep("10.0.0.2", ptr.To(false)))},
			err:    ErrNoEndpoints},
		{name: "no such port", svc: svc, port: 80, err: ErrNoPort},
		{name: "ExternalName", port: 443, want: "hooks.example:443",
			svc: &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "hooks.example"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Pick(tc.svc, tc.slices, tc.port)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("Pick = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}
