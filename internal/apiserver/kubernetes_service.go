package apiserver

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EnsureKubernetesService creates the kubernetes Service in default (the first address of
// the service range, port 443 to the API server's port) if it is missing or repairs its
// ports, and points its Endpoints and EndpointSlice at addr:port, as upstream's bootstrap
// controller and master endpoint reconciler do. An invalid addr leaves the endpoints alone.
func (s *Server) EnsureKubernetesService(ctx context.Context, addr netip.Addr, port int) error {
	const name, ns, portName = "kubernetes", metav1.NamespaceDefault, "https"
	opts := updateOptions{writeOptions: writeOptions{manager: "kube-apiserver"}, createIfMissing: true}
	svcRes, _ := s.table.Lookup(schemaCoreV1, "services")
	wantPorts := []corev1.ServicePort{{Name: portName, Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(port))}}
	_, _, err := s.update(ctx, svcRes, ns, name, func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			ip := s.FirstServiceIP().String()
			return &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
					Ports: wantPorts, SessionAffinity: corev1.ServiceAffinityNone},
			}, nil
		}
		svc := cur.(*corev1.Service)
		svc.Spec.Ports = wantPorts
		return svc, nil
	}, opts)
	if err != nil {
		return fmt.Errorf("ensure service default/kubernetes: %w", err)
	}
	if !addr.IsValid() {
		return nil
	}

	epRes, _ := s.table.Lookup(schemaCoreV1, "endpoints")
	subsets := []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: addr.String()}},
		Ports:     []corev1.EndpointPort{{Name: portName, Port: int32(port), Protocol: corev1.ProtocolTCP}},
	}}
	epLabels := map[string]string{discoveryv1.LabelSkipMirror: "true"}
	_, _, err = s.update(ctx, epRes, ns, name, func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: epLabels}, Subsets: subsets}, nil
		}
		ep := cur.(*corev1.Endpoints)
		if apiequality.Semantic.DeepEqual(ep.Subsets, subsets) && ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
			return ep, nil
		}
		ep.Subsets = subsets
		if ep.Labels == nil {
			ep.Labels = map[string]string{}
		}
		ep.Labels[discoveryv1.LabelSkipMirror] = "true"
		return ep, nil
	}, opts)
	if err != nil {
		return fmt.Errorf("ensure endpoints default/kubernetes: %w", err)
	}

	sliceRes, ok := s.table.Lookup(discoveryv1.SchemeGroupVersion, "endpointslices")
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("endpointslices are not served"))
	}
	ready, proto, p32, pn := true, corev1.ProtocolTCP, int32(port), portName
	endpoints := []discoveryv1.Endpoint{{Addresses: []string{addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	ports := []discoveryv1.EndpointPort{{Name: &pn, Protocol: &proto, Port: &p32}}
	_, _, err = s.update(ctx, sliceRes, ns, name, func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints, Ports: ports,
			}, nil
		}
		sl := cur.(*discoveryv1.EndpointSlice)
		sl.AddressType, sl.Endpoints, sl.Ports = discoveryv1.AddressTypeIPv4, endpoints, ports
		if sl.Labels == nil {
			sl.Labels = map[string]string{}
		}
		sl.Labels[discoveryv1.LabelServiceName] = name
		return sl, nil
	}, opts)
	if err != nil {
		return fmt.Errorf("ensure endpointslice default/kubernetes: %w", err)
	}
	return nil
}
