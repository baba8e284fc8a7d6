package kubelet

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceVars(t *testing.T) {
	s := svc("ns", "foo-service", "10.96.0.7",
		v1.ServicePort{Port: 8765, TargetPort: intstr.FromInt32(8080)},
		v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP})
	var got []string
	for _, e := range serviceVars(s) {
		got = append(got, e.Name+"="+e.Value)
	}
	want := []string{
		"FOO_SERVICE_SERVICE_HOST=10.96.0.7",
		"FOO_SERVICE_SERVICE_PORT=8765",
		"FOO_SERVICE_SERVICE_PORT_DNS_UDP=53",
		"FOO_SERVICE_PORT=tcp://10.96.0.7:8765",
		"FOO_SERVICE_PORT_8765_TCP=tcp://10.96.0.7:8765",
		"FOO_SERVICE_PORT_8765_TCP_PROTO=tcp",
		"FOO_SERVICE_PORT_8765_TCP_PORT=8765",
		"FOO_SERVICE_PORT_8765_TCP_ADDR=10.96.0.7",
		"FOO_SERVICE_PORT_53_UDP=udp://10.96.0.7:53",
		"FOO_SERVICE_PORT_53_UDP_PROTO=udp",
		"FOO_SERVICE_PORT_53_UDP_PORT=53",
		"FOO_SERVICE_PORT_53_UDP_ADDR=10.96.0.7",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("vars:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v := serviceVars(svc("ns", "six", "fd00::7", v1.ServicePort{Port: 80})); v[3].Value != "tcp://[fd00::7]:80" {
		t.Errorf("IPv6 %s = %s", v[3].Name, v[3].Value)
	}
}

// TestContainerEnvServices: the pod's namespace's Services with a ClusterIP and the default
// namespace's kubernetes Service, after the container's own variables, which win and may refer
// to them; enableServiceLinks false leaves only the kubernetes Service.
func TestContainerEnvServices(t *testing.T) {
	h := newHarness(t)
	for _, s := range []*v1.Service{
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443}),
		svc("default", "other", "10.96.0.9", v1.ServicePort{Port: 1}),
		svc("ns", "fooservice", "10.96.0.7", v1.ServicePort{Port: 8765}),
		svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "x.example"}},
		svc("elsewhere", "far", "10.96.0.8", v1.ServicePort{Port: 2}),
	} {
		if err := h.k.svcInformer.GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "c",
		Env: []v1.EnvVar{
			{Name: "FOOSERVICE_SERVICE_PORT", Value: "own"},
			{Name: "URL", Value: "http://$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"},
		},
	}}}}
	in := envInputs{client: h.client, services: h.k.services}
	env, err := containerEnv(context.Background(), in, pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var names []string
	for _, e := range env {
		if _, dup := got[e.Name]; dup {
			t.Errorf("%s twice", e.Name)
		}
		got[e.Name] = e.Value
		names = append(names, e.Name)
	}
	if names[0] != "FOOSERVICE_SERVICE_PORT" || names[1] != "URL" {
		t.Errorf("the container's own variables come first: %v", names)
	}
	for k, v := range map[string]string{
		"FOOSERVICE_SERVICE_PORT":       "own",
		"URL":                           "http://10.96.0.7:own",
		"FOOSERVICE_SERVICE_HOST":       "10.96.0.7",
		"FOOSERVICE_PORT":               "tcp://10.96.0.7:8765",
		"FOOSERVICE_PORT_8765_TCP_ADDR": "10.96.0.7",
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, absent := range []string{"HEADLESS_SERVICE_HOST", "EXT_SERVICE_HOST", "FAR_SERVICE_HOST", "OTHER_SERVICE_HOST"} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s set", absent)
		}
	}

	off := false
	pod.Spec.EnableServiceLinks = &off
	env, err = containerEnv(context.Background(), in, pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]string{}
	for _, e := range env {
		got[e.Name] = e.Value
	}
	if got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" || got["FOOSERVICE_SERVICE_HOST"] != "" {
		t.Errorf("enableServiceLinks false: %v", got)
	}
	if got["URL"] != "http://$(FOOSERVICE_SERVICE_HOST):own" {
		t.Errorf("URL = %q: without service links the reference stays as written", got["URL"])
	}
}
