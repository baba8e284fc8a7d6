package trace

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func owned(name, uid string, owner metav1.Object, kind string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind(kind))}
	}
	return m
}

func TestFollowThroughOwnerReferences(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: owned("web", "d1", nil, "")}
	rs := &appsv1.ReplicaSet{ObjectMeta: owned("web-abc", "rs1", d, "Deployment")}
	otherRS := &appsv1.ReplicaSet{ObjectMeta: owned("api-def", "rs2", nil, "")}
	p1 := &corev1.Pod{ObjectMeta: owned("web-abc-2", "p1", rs, "ReplicaSet")}
	p2 := &corev1.Pod{ObjectMeta: owned("web-abc-1", "p2", rs, "ReplicaSet")}
	stray := &corev1.Pod{ObjectMeta: owned("api-def-1", "p3", otherRS, "ReplicaSet")}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc-1.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-abc-1", UID: "p2"}, Reason: "Scheduled",
		Message: "Successfully assigned default/web-abc-1 to node-1", Source: corev1.EventSource{Component: "default-scheduler"}}
	kev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc-1.2"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-abc-1", UID: "p2"}, Reason: "Started",
		Message: "Started container app", Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}}
	strayEv := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "api-def-1", UID: "p3"}, Reason: "Scheduled"}
	client := fake.NewClientset(d, rs, otherRS, p1, p2, stray, ev, kev, strayEv)
	ctx := context.Background()

	objs, err := Follow(ctx, client, "Deployment", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Kind+"/"+o.Ref.Name+"<"+o.Owner)
	}
	want := []string{"Deployment/web<", "ReplicaSet/web-abc<d1", "Pod/web-abc-1<rs1", "Pod/web-abc-2<rs1"}
	if len(got) != len(want) {
		t.Fatalf("followed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("followed %v, want %v", got, want)
		}
	}
	events, err := Events(ctx, client, "default", objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 {
		t.Fatalf("events %+v, want the two about web-abc-1", events)
	}
	actors := map[string]bool{}
	for _, e := range events {
		actors[e.Component] = true
	}
	if !actors["scheduler"] || !actors["kubelet/node-1"] {
		t.Fatalf("event actors %v, want scheduler and kubelet/node-1", actors)
	}

	objs, err = Follow(ctx, client, "ReplicaSet", "default", "web-abc")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 || objs[0].Owner != "" {
		t.Fatalf("from the ReplicaSet: %+v", objs)
	}
}

func TestActor(t *testing.T) {
	cm := "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/kube-controller-manager"
	for _, c := range []struct {
		user, ua, fm, res, sub string
		delivery               bool
		want                   string
	}{
		{"kubernetes-admin", "kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9", "", "deployments.apps", "", false, "kubectl"},
		{"system:kube-controller-manager", cm, "", "replicasets.apps", "", false, "deployment-controller"},
		{"system:kube-controller-manager", cm, "", "replicasets.apps", "status", false, "replicaset-controller"},
		{"system:kube-controller-manager", cm, "", "pods", "", false, "replicaset-controller"},
		{"system:kube-controller-manager", cm, "", "replicasets.apps", "", true, "replicaset-controller"},
		{"system:kube-controller-manager", "x/v1 (linux/amd64) kubernetes/abc/endpointslice-controller", "", "pods", "", true, "endpointslice-controller"},
		{"system:kube-controller-manager", cm, "garbage-collector-controller", "pods", "", false, "garbage-collector-controller"},
		{"system:kube-controller-manager", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/replicaset-controller", "", "pods", "", false, "replicaset-controller"},
		{"system:kube-controller-manager", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/endpoint-controller", "", "endpoints", "", false, "endpoint-controller"},
		{"system:kube-controller-manager", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/replication-controller", "", "pods", "", false, "replication-controller"},
		{"system:kube-controller-manager", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/endpointslicemirroring-controller", "", "endpointslices.discovery.k8s.io", "", false, "endpoint-slice-mirroring-controller"},
		{"system:kube-controller-manager", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/generic-garbage-collector", "", "pods", "", false, "garbage-collector-controller"},
		{"system:kube-controller-manager", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/shared-informers", "", "replicasets.apps", "", true, "replicaset-controller"},
		{"system:serviceaccount:kube-system:deployment-controller",
			"kube-controller-manager/v1.32.0 (linux/amd64) kubernetes/70d3cc9/system:serviceaccount:kube-system:deployment-controller", "", "replicasets.apps", "", false, "deployment-controller"},
		{"system:serviceaccount:kube-system:kube-proxy", "kube-proxy/v1.32.0 (linux/amd64) kubernetes/70d3cc9", "", "services", "", true, "kube-proxy"},
		{"system:kube-proxy", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format", "", "endpointslices.discovery.k8s.io", "", true, "kube-proxy"},
		{"kubernetes-admin", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/kube-proxy", "", "services", "", true, "kube-proxy"},
		{"system:kubette-ingress-controller", "kubette/v0.1.0", "", "ingresses.networking.k8s.io", "status", false, "ingress-controller"},
		{"system:kubette-dns", "kubette/v0.1.0", "", "services", "", true, "dns"},
		{"system:kube-scheduler", "kubette-scheduler", "", "pods", "binding", false, "scheduler"},
		{"kubernetes-admin", "kubette/v0.1.0 (linux/amd64) kubernetes/$Format/kubette-scheduler", "", "pods", "binding", false, "scheduler"},
		{"system:node:node-1", "kubette/v0.1.0", "", "pods", "status", false, "kubelet/node-1"},
		{"kubernetes-admin", "trace.test/v0.0.0 (linux/amd64) kubernetes/$Format", "", "deployments.apps", "", false, "trace.test"},
	} {
		if got := Actor(c.user, c.ua, c.fm, c.res, c.sub, c.delivery); got != c.want {
			t.Errorf("Actor(%q, %q, %q, %q, %q, %v) = %q, want %q", c.user, c.ua, c.fm, c.res, c.sub, c.delivery, got, c.want)
		}
	}
}

func TestFollowServiceAndIngress(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "s1"}}
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api", UID: "s2"}}
	slice := func(name, service, uid string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid),
			Labels: map[string]string{discoveryv1.LabelServiceName: service}}}
	}
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "e1"}}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "site", UID: "i1"},
		Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}},
			Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{
					{Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "api"}}},
					{Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "missing"}}},
					{Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}}},
				}}}}}}}
	client := fake.NewClientset(svc, other, slice("web-b", "web", "sl2"), slice("web-a", "web", "sl1"), slice("api-x", "api", "sl3"), eps, ing)
	ctx := context.Background()
	describe := func(objs []Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Kind+"/"+o.Ref.Name+"<"+o.Owner)
		}
		return out
	}
	objs, err := Follow(ctx, client, "Service", "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Service/web<", "EndpointSlice/web-a<s1", "EndpointSlice/web-b<s1", "Endpoints/web<s1"}
	if got := describe(objs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("service: followed %v, want %v", got, want)
	}
	if objs[1].Ref.Resource != "endpointslices.discovery.k8s.io" || objs[3].Ref.Resource != "endpoints" {
		t.Errorf("resources %q, %q", objs[1].Ref.Resource, objs[3].Ref.Resource)
	}
	objs, err = Follow(ctx, client, "Ingress", "default", "site")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"Ingress/site<", "Service/api<i1", "Service/web<i1", "EndpointSlice/api-x<s2",
		"EndpointSlice/web-a<s1", "EndpointSlice/web-b<s1", "Endpoints/web<s1"}
	if got := describe(objs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ingress: followed %v, want %v", got, want)
	}
	if objs[0].Ref.Resource != "ingresses.networking.k8s.io" {
		t.Errorf("ingress resource %q", objs[0].Ref.Resource)
	}
	for _, k := range []string{"svc", "Service", "ing", "ingresses"} {
		if _, err := ParseKind(k); err != nil {
			t.Errorf("ParseKind(%q): %v", k, err)
		}
	}
}
