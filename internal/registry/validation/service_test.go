package validation

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func serviceWith(mutate func(s *corev1.Service)) *corev1.Service {
	s := validService()
	mutate(s)
	return s
}

func TestValidateServiceCreate(t *testing.T) {
	runCreateCases(t, []createCase{
		{name: "valid", obj: validService()},
		{name: "valid with allocated IP", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.10"
			s.Spec.ClusterIPs = []string{"10.96.0.10"}
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		})},
		{name: "valid singular clusterIP only", obj: serviceWith(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.10" })},
		{name: "valid headless without ports", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.ClusterIP = corev1.ClusterIPNone
			s.Spec.Ports = nil
		})},
		{name: "valid NodePort", obj: defaulted(&corev1.Service{ObjectMeta: objectMeta("np"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}})},
		{name: "valid ExternalName", obj: defaulted(&corev1.Service{ObjectMeta: objectMeta("ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com."}})},
		{name: "valid name starting with a digit (DNS-1123 label)", obj: serviceWith(func(s *corev1.Service) { s.Name = "1web" })},
		{name: "name not a DNS label", obj: serviceWith(func(s *corev1.Service) { s.Name = "web.example" }), errors: []want{inv("metadata.name")}},
		{name: "ports required", obj: serviceWith(func(s *corev1.Service) { s.Spec.Ports = nil }), errors: []want{req("spec.ports")}},
		{name: "port out of range", obj: serviceWith(func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }), errors: []want{inv("spec.ports[0].port")}},
		{name: "port too high", obj: serviceWith(func(s *corev1.Service) { s.Spec.Ports[0].Port = 65536 }), errors: []want{inv("spec.ports[0].port")}},
		{name: "protocol unsupported", obj: serviceWith(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "HTTP" }), errors: []want{unsup("spec.ports[0].protocol")}},
		{name: "targetPort name invalid", obj: serviceWith(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("HTTP_PORT") }),
			errors: []want{inv("spec.ports[0].targetPort"), inv("spec.ports[0].targetPort")}},
		{name: "names required with several ports", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(443)})
		}), errors: []want{req("spec.ports[0].name")}},
		{name: "duplicate port names", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "web"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "web", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(443)})
		}), errors: []want{dup("spec.ports[1].name")}},
		{name: "duplicate port numbers", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}), errors: []want{dup("spec.ports[1]")}},
		{name: "type unsupported", obj: serviceWith(func(s *corev1.Service) { s.Spec.Type = "Internal" }), errors: []want{unsup("spec.type")}},
		{name: "nodePort on ClusterIP", obj: serviceWith(func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30001 }), errors: []want{forb("spec.ports[0].nodePort")}},
		{name: "clusterIP invalid", obj: serviceWith(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0" }), errors: []want{inv("spec.clusterIPs[0]")}},
		{name: "clusterIPs mismatch", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.10"
			s.Spec.ClusterIPs = []string{"10.96.0.11"}
		}), errors: []want{invd("spec.clusterIPs", "first value must match `clusterIP`")}},
		{name: "headless LoadBalancer", obj: defaulted(&corev1.Service{ObjectMeta: objectMeta("lb"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "None",
			Ports: []corev1.ServicePort{{Port: 80}}}}), errors: []want{invd("spec.clusterIPs[0]", "may not be set to 'None' for LoadBalancer services")}},
		{name: "ExternalName requires externalName", obj: defaulted(&corev1.Service{ObjectMeta: objectMeta("ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}}),
			errors: []want{req("spec.externalName")}},
		{name: "ExternalName with clusterIP", obj: defaulted(&corev1.Service{ObjectMeta: objectMeta("ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db", ClusterIP: "10.0.0.1"}}),
			errors: []want{forb("spec.clusterIPs")}},
		{name: "sessionAffinity unsupported", obj: serviceWith(func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" }), errors: []want{unsup("spec.sessionAffinity")}},
		{name: "externalTrafficPolicy on ClusterIP", obj: serviceWith(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }),
			errors: []want{invd("spec.externalTrafficPolicy", "may only be set for externally-accessible services")}},
		{name: "selector invalid", obj: serviceWith(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "bad value"} }), errors: []want{inv("spec.selector")}},
		{name: "externalIP loopback", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"127.0.0.1"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}),
			errors: []want{invd("spec.externalIPs[0]", "loopback")}},
		{name: "loadBalancerSourceRanges on ClusterIP", obj: serviceWith(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }),
			errors: []want{forb("spec.LoadBalancerSourceRanges")}},
		{name: "internalTrafficPolicy unsupported", obj: serviceWith(func(s *corev1.Service) {
			p := corev1.ServiceInternalTrafficPolicy("Zone")
			s.Spec.InternalTrafficPolicy = &p
		}), errors: []want{unsup("spec.internalTrafficPolicy")}},
		{name: "ipFamilies duplicate", obj: serviceWith(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}
		}), errors: []want{dup("spec.ipFamilies[1]")}},
	})
}

func TestValidateServiceUpdate(t *testing.T) {
	old := stored(validService())
	old.Spec.ClusterIP = "10.96.0.10"
	old.Spec.ClusterIPs = []string{"10.96.0.10"}
	old.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	old.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
	upd := func(mutate func(s *corev1.Service)) *corev1.Service {
		s := old.DeepCopy()
		mutate(s)
		return s
	}
	runUpdateCases(t, []updateCase{
		{name: "change ports and selector", old: old, obj: upd(func(s *corev1.Service) {
			s.Spec.Ports[0].Port = 8080
			s.Spec.Selector = map[string]string{"app": "web2"}
		})},
		{name: "change clusterIP", old: old, obj: upd(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.11" }),
			errors: []want{invd("spec.clusterIPs[0]", "may not change once set")}},
		{name: "change clusterIPs", old: old, obj: upd(func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.11"
			s.Spec.ClusterIPs = []string{"10.96.0.11"}
		}), errors: []want{invd("spec.clusterIPs[0]", "may not change once set")}},
		{name: "unset clusterIP", old: old, obj: upd(func(s *corev1.Service) {
			s.Spec.ClusterIP = ""
			s.Spec.ClusterIPs = nil
		}), errors: []want{invd("spec.clusterIPs[0]", "primary clusterIP can not be unset")}},
		{name: "change to ExternalName", old: old, obj: upd(func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: corev1.ServiceAffinityNone}
		})},
		{name: "change type to NodePort", old: old, obj: upd(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		})},
		{name: "change ipFamilies", old: old, obj: upd(func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
			errors: []want{invd("spec.ipFamilies[0]", "may not change once set"), invd("spec.clusterIPs[0]", "expected an IPv6 value")}},
	})

	extOld := stored(defaulted(&corev1.Service{ObjectMeta: objectMeta("ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}))
	fromExt := extOld.DeepCopy()
	fromExt.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.20", SessionAffinity: corev1.ServiceAffinityNone,
		Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}}, InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster)}
	runUpdateCases(t, []updateCase{{name: "ExternalName to ClusterIP", old: extOld, obj: fromExt}})
}

func TestServiceClusterIPImmutableMessage(t *testing.T) {
	old := stored(validService())
	old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
	s := old.DeepCopy()
	s.Spec.ClusterIP = "10.96.0.99"
	got := ValidateUpdate(s, old).ToAggregate().Error()
	want := `spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set`
	if got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestValidateServiceStatusUpdate(t *testing.T) {
	lb := stored(defaulted(&corev1.Service{ObjectMeta: objectMeta("lb"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}))
	withIngress := func(ing ...corev1.LoadBalancerIngress) *corev1.Service {
		s := lb.DeepCopy()
		s.Status.LoadBalancer.Ingress = ing
		return s
	}
	clusterIP := stored(validService())
	onClusterIP := clusterIP.DeepCopy()
	onClusterIP.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}
	runUpdateCases(t, []updateCase{
		{name: "valid", status: true, old: lb, obj: withIngress(corev1.LoadBalancerIngress{IP: "203.0.113.10", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}, corev1.LoadBalancerIngress{Hostname: "lb.example.com"})},
		{name: "ip invalid", status: true, old: lb, obj: withIngress(corev1.LoadBalancerIngress{IP: "203.0.113", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}),
			errors: []want{inv("status.loadBalancer.ingress[0].ip")}},
		{name: "ipMode required", status: true, old: lb, obj: withIngress(corev1.LoadBalancerIngress{IP: "203.0.113.10"}),
			errors: []want{req("status.loadBalancer.ingress[0].ipMode")}},
		{name: "hostname is an IP", status: true, old: lb, obj: withIngress(corev1.LoadBalancerIngress{Hostname: "203.0.113.10"}),
			errors: []want{invd("status.loadBalancer.ingress[0].hostname", "must be a DNS name, not an IP address")}},
		{name: "not a LoadBalancer", status: true, old: clusterIP, obj: onClusterIP, errors: []want{forb("status.loadBalancer.ingress")}},
	})
}

func validEndpoints() *corev1.Endpoints {
	return defaulted(&corev1.Endpoints{
		ObjectMeta: objectMeta("web"),
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5", NodeName: ptr("node-1")}},
			Ports:     []corev1.EndpointPort{{Port: 8080}},
		}},
	})
}

func TestValidateEndpoints(t *testing.T) {
	with := func(mutate func(e *corev1.Endpoints)) *corev1.Endpoints {
		e := validEndpoints()
		mutate(e)
		return e
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: validEndpoints()},
		{name: "valid empty", obj: defaulted(&corev1.Endpoints{ObjectMeta: objectMeta("web")})},
		{name: "subset without addresses", obj: with(func(e *corev1.Endpoints) { e.Subsets[0].Addresses = nil }), errors: []want{req("subsets[0]")}},
		{name: "invalid IP", obj: with(func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "10.244.1" }), errors: []want{inv("subsets[0].addresses[0].ip")}},
		{name: "loopback IP", obj: with(func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "127.0.0.1" }), errors: []want{inv("subsets[0].addresses[0].ip")}},
		{name: "port out of range", obj: with(func(e *corev1.Endpoints) { e.Subsets[0].Ports[0].Port = 0 }), errors: []want{inv("subsets[0].ports[0].port")}},
		{name: "port names required", obj: with(func(e *corev1.Endpoints) {
			e.Subsets[0].Ports = append(e.Subsets[0].Ports, corev1.EndpointPort{Name: "b", Port: 81, Protocol: corev1.ProtocolTCP})
		}), errors: []want{req("subsets[0].ports[0].name")}},
		{name: "protocol unsupported", obj: with(func(e *corev1.Endpoints) { e.Subsets[0].Ports[0].Protocol = "ICMP" }), errors: []want{unsup("subsets[0].ports[0].protocol")}},
	})
}

func validSlice() *discoveryv1.EndpointSlice {
	return defaulted(&discoveryv1.EndpointSlice{
		ObjectMeta:  objectMeta("web-abc"),
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	})
}

func TestValidateEndpointSlice(t *testing.T) {
	with := func(mutate func(s *discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
		s := validSlice()
		mutate(s)
		return s
	}
	many := make([]discoveryv1.Endpoint, 1001)
	for i := range many {
		many[i] = discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}}
	}
	manyPorts := make([]discoveryv1.EndpointPort, 101)
	for i := range manyPorts {
		manyPorts[i] = discoveryv1.EndpointPort{Name: ptr(fmt.Sprintf("p%d", i)), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(1000 + i))}
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: validSlice()},
		{name: "valid FQDN", obj: with(func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints[0].Addresses = []string{"db.example.com"}
		})},
		{name: "addressType required", obj: with(func(s *discoveryv1.EndpointSlice) { s.AddressType = "" }), errors: []want{req("addressType")}},
		{name: "addressType unsupported", obj: with(func(s *discoveryv1.EndpointSlice) { s.AddressType = "IP" }), errors: []want{unsup("addressType")}},
		{name: "IPv6 address in IPv4 slice", obj: with(func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"fd00::1"} }),
			errors: []want{invd("endpoints[0].addresses[0]", "must be a valid IPv4 address")}},
		{name: "invalid address", obj: with(func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"not-an-ip"} }),
			errors: []want{inv("endpoints[0].addresses[0]")}},
		{name: "endpoint without addresses", obj: with(func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = nil }),
			errors: []want{req("endpoints[0].addresses")}},
		{name: "too many endpoints", obj: with(func(s *discoveryv1.EndpointSlice) { s.Endpoints = many }), errors: []want{tooMany("endpoints")}},
		{name: "too many ports", obj: with(func(s *discoveryv1.EndpointSlice) { s.Ports = manyPorts }), errors: []want{tooMany("ports")}},
		{name: "duplicate port names", obj: with(func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(81))})
		}), errors: []want{dup("ports[1].name")}},
		{name: "hostname invalid", obj: with(func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hostname = ptr("Host_1") }),
			errors: []want{inv("endpoints[0].hostname")}},
	})
	old := stored(validSlice())
	changed := old.DeepCopy()
	changed.AddressType = discoveryv1.AddressTypeIPv6
	changed.Endpoints[0].Addresses = []string{"fd00::5"}
	moved := old.DeepCopy()
	moved.Endpoints[0].Addresses = []string{"10.244.2.7"}
	runUpdateCases(t, []updateCase{
		{name: "addresses change", old: old, obj: moved},
		{name: "addressType immutable", old: old, obj: changed, errors: []want{immutable("addressType")}},
	})
}
