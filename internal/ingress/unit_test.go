package ingress

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassSet(t *testing.T) {
	class := func(name, controller string, def bool) *networkingv1.IngressClass {
		c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
		if def {
			c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
		}
		return c
	}
	ing := func(class *string, ann map[string]string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: networkingv1.IngressSpec{IngressClassName: class}}
	}
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name    string
		classes []*networkingv1.IngressClass
		ing     *networkingv1.Ingress
		want    bool
	}{
		{"our class", []*networkingv1.IngressClass{class("nginx", ControllerName, false)}, ing(s("nginx"), nil), true},
		{"other class", []*networkingv1.IngressClass{class("nginx", ControllerName, false), class("x", "other", true)}, ing(s("x"), nil), false},
		{"class that does not exist", nil, ing(s("nginx"), nil), false},
		{"no class, ours not default", []*networkingv1.IngressClass{class("nginx", ControllerName, false)}, ing(nil, nil), false},
		{"no class, ours default", []*networkingv1.IngressClass{class("nginx", ControllerName, true)}, ing(nil, nil), true},
		{"no class, other default", []*networkingv1.IngressClass{class("nginx", ControllerName, false), class("x", "other", true)}, ing(nil, nil), false},
		{"legacy annotation", []*networkingv1.IngressClass{class("nginx", ControllerName, false)}, ing(nil, map[string]string{legacyClassAnnotation: "nginx"}), true},
		{"legacy annotation, other", []*networkingv1.IngressClass{class("nginx", ControllerName, true)}, ing(nil, map[string]string{legacyClassAnnotation: "x"}), false},
	} {
		if got := newClassSet(tc.classes).serves(tc.ing); got != tc.want {
			t.Errorf("%s: serves = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseAnnotations(t *testing.T) {
	good := map[string]string{
		AnnotationRewriteTarget: "/v2/", AnnotationSSLRedirect: "false", AnnotationProxyBodySize: "16M",
		AnnotationProxyConnectTimeout: "3", AnnotationProxyReadTimeout: "500ms", AnnotationProxySendTimeout: "1h",
		AnnotationPrefix + "unknown": "ignored",
	}
	s, err := parseAnnotations(good)
	if err != nil {
		t.Fatal(err)
	}
	want := settings{rewriteTarget: "/v2/", sslRedirect: false, bodySize: "16M", connectTimeout: "3s", readTimeout: "500ms", sendTimeout: "1h"}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if s, err := parseAnnotations(nil); err != nil || !s.sslRedirect {
		t.Errorf("defaults: %+v %v", s, err)
	}
	for k, v := range map[string]string{
		AnnotationRewriteTarget: "v2", AnnotationSSLRedirect: "maybe", AnnotationProxyBodySize: "1 m",
		AnnotationProxyConnectTimeout: "-1", AnnotationProxyReadTimeout: "5;", AnnotationProxySendTimeout: "1d",
		AnnotationSSLRedirectShort: "nope",
	} {
		if _, err := parseAnnotations(map[string]string{k: v}); err == nil {
			t.Errorf("%s=%q accepted", k, v)
		}
	}
	if _, err := parseAnnotations(map[string]string{AnnotationRewriteTarget: "/a;b"}); err == nil {
		t.Errorf("rewrite-target with ; accepted")
	}
}
