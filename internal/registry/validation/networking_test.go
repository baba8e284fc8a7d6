package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validIngress() *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return defaulted(&networkingv1.Ingress{
		ObjectMeta: objectMeta("web"),
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr("nginx"),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}, SecretName: "web-tls"}},
			Rules: []networkingv1.IngressRule{{
				Host: "web.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}},
			}},
		},
	})
}

func TestValidateIngress(t *testing.T) {
	with := func(mutate func(i *networkingv1.Ingress)) *networkingv1.Ingress {
		i := validIngress()
		mutate(i)
		return i
	}
	p0 := "spec.rules[0].http.paths[0]"
	path0 := func(i *networkingv1.Ingress) *networkingv1.HTTPIngressPath { return &i.Spec.Rules[0].HTTP.Paths[0] }
	runCreateCases(t, []createCase{
		{name: "valid", obj: validIngress()},
		{name: "valid wildcard host", obj: with(func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "*.example.com" })},
		{name: "valid default backend only", obj: with(func(i *networkingv1.Ingress) {
			i.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"}}}
			i.Spec.Rules = nil
		})},
		{name: "rules or defaultBackend required", obj: with(func(i *networkingv1.Ingress) { i.Spec.Rules = nil }), errors: []want{invd("spec", "either `defaultBackend` or `rules` must be specified")}},
		{name: "host invalid", obj: with(func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "Web.Example.com" }), errors: []want{inv("spec.rules[0].host")}},
		{name: "host is an IP", obj: with(func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "10.0.0.1" }), errors: []want{invd("spec.rules[0].host", "must be a DNS name, not an IP address")}},
		{name: "bad wildcard", obj: with(func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "web.*.com" }), errors: []want{inv("spec.rules[0].host")}},
		{name: "pathType required", obj: with(func(i *networkingv1.Ingress) { path0(i).PathType = nil }), errors: []want{req(p0 + ".pathType")}},
		{name: "pathType unsupported", obj: with(func(i *networkingv1.Ingress) {
			pt := networkingv1.PathType("Regex")
			path0(i).PathType = &pt
		}), errors: []want{unsup(p0 + ".pathType")}},
		{name: "Prefix path must be absolute", obj: with(func(i *networkingv1.Ingress) { path0(i).Path = "api" }), errors: []want{invd(p0+".path", "must be an absolute path")}},
		{name: "Exact path with //", obj: with(func(i *networkingv1.Ingress) {
			pt := networkingv1.PathTypeExact
			path0(i).PathType = &pt
			path0(i).Path = "/a//b"
		}), errors: []want{invd(p0+".path", "must not contain '//'")}},
		{name: "paths required", obj: with(func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths = nil }), errors: []want{req("spec.rules[0].http.paths")}},
		{name: "backend required", obj: with(func(i *networkingv1.Ingress) { path0(i).Backend = networkingv1.IngressBackend{} }),
			errors: []want{invd(p0+".backend", "resource or service backend is required")}},
		{name: "both backends", obj: with(func(i *networkingv1.Ingress) {
			ref := corev1TypedLocalObjectReference()
			path0(i).Backend.Resource = &ref
		}), errors: []want{invd(p0+".backend", "cannot set both resource and service backends")}},
		{name: "service port required", obj: with(func(i *networkingv1.Ingress) { path0(i).Backend.Service.Port = networkingv1.ServiceBackendPort{} }),
			errors: []want{req(p0 + ".backend")}},
		{name: "service port name and number", obj: with(func(i *networkingv1.Ingress) { path0(i).Backend.Service.Port.Name = "http" }),
			errors: []want{invd(p0+".backend", "cannot set both port name & port number")}},
		{name: "service port number out of range", obj: with(func(i *networkingv1.Ingress) { path0(i).Backend.Service.Port.Number = 70000 }),
			errors: []want{inv(p0 + ".backend.service.port.number")}},
		{name: "service name required", obj: with(func(i *networkingv1.Ingress) { path0(i).Backend.Service.Name = "" }),
			errors: []want{req(p0 + ".backend.service.name")}},
		{name: "tls secret name invalid", obj: with(func(i *networkingv1.Ingress) { i.Spec.TLS[0].SecretName = "Web_TLS" }),
			errors: []want{inv("spec.tls[0].secretName")}},
		{name: "ingress class annotation mismatch", obj: with(func(i *networkingv1.Ingress) {
			i.Annotations = map[string]string{"kubernetes.io/ingress.class": "traefik"}
		}), errors: []want{inv("annotations.kubernetes.io/ingress.class")}},
	})

	old := stored(validIngress())
	moved := old.DeepCopy()
	moved.Spec.Rules[0].Host = "www.example.com"
	badTLS := stored(validIngress())
	badTLS.Spec.TLS[0].SecretName = "Legacy_TLS"
	badTLSUpdate := badTLS.DeepCopy()
	badTLSUpdate.Labels = map[string]string{"a": "b"}
	status := old.DeepCopy()
	status.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.5"}, {Hostname: "lb.example.com"}}
	badStatus := old.DeepCopy()
	badStatus.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113"}}
	runUpdateCases(t, []updateCase{
		{name: "host change", old: old, obj: moved},
		{name: "stored invalid secret name is tolerated", old: badTLS, obj: badTLSUpdate},
		{name: "status", status: true, old: old, obj: status},
		{name: "status invalid IP", status: true, old: old, obj: badStatus, errors: []want{inv("status.loadBalancer.ingress[0].ip")}},
	})
}

func TestValidateIngressClass(t *testing.T) {
	ic := func(mutate func(c *networkingv1.IngressClass)) *networkingv1.IngressClass {
		c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
		mutate(c)
		return defaulted(c)
	}
	runCreateCases(t, []createCase{
		{name: "valid", obj: ic(func(*networkingv1.IngressClass) {})},
		{name: "valid parameters", obj: ic(func(c *networkingv1.IngressClass) {
			c.Spec.Parameters = &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"}
		})},
		{name: "controller required", obj: ic(func(c *networkingv1.IngressClass) { c.Spec.Controller = "" }), errors: []want{req("spec.controller")}},
		{name: "controller not domain-prefixed", obj: ic(func(c *networkingv1.IngressClass) { c.Spec.Controller = "nginx" }), errors: []want{inv("spec.controller")}},
		{name: "controller too long", obj: ic(func(c *networkingv1.IngressClass) { c.Spec.Controller = "example.com/" + strings.Repeat("a", 250) }),
			errors: []want{tooLong("spec.controller")}},
		{name: "namespace scope needs namespace", obj: ic(func(c *networkingv1.IngressClass) {
			c.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "P", Name: "p", Scope: ptr(networkingv1.IngressClassParametersReferenceScopeNamespace)}
		}), errors: []want{req("spec.parameters.namespace")}},
		{name: "cluster-scoped kind", obj: ic(func(c *networkingv1.IngressClass) { c.Namespace = "default" }), errors: []want{forb("metadata.namespace")}},
	})
	old := stored(ic(func(*networkingv1.IngressClass) {}))
	changed := old.DeepCopy()
	changed.Spec.Controller = "example.com/other"
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
	runUpdateCases(t, []updateCase{
		{name: "controller immutable", old: old, obj: changed, errors: []want{immutable("spec.controller")}},
		{name: "annotations", old: old, obj: annotated},
	})
}

func corev1TypedLocalObjectReference() corev1.TypedLocalObjectReference {
	return corev1.TypedLocalObjectReference{APIGroup: ptr("example.com"), Kind: "Bucket", Name: "static"}
}
