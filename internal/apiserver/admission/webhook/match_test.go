package webhook

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// fakeServer serves fixed objects by group-resource.
type fakeServer struct {
	objs     map[schema.GroupResource][]runtime.Object
	versions []string
}

func (f *fakeServer) Get(_ context.Context, gr schema.GroupResource, ns, name string) (runtime.Object, error) {
	for _, o := range f.objs[gr] {
		m := o.(metav1.Object)
		if m.GetNamespace() == ns && m.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func (f *fakeServer) List(_ context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range f.objs[gr] {
		if ns == "" || o.(metav1.Object).GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out, nil
}

func (f *fakeServer) Versions(schema.GroupResource) []string { return f.versions }
func (f *fakeServer) Convert(obj runtime.Object, _ schema.GroupVersionResource) (runtime.Object, error) {
	return obj, nil
}
func (f *fakeServer) Decode(schema.GroupVersionResource, []byte) (runtime.Object, error) {
	return nil, nil
}

// TestResolve: a Service's port is reached at a ready endpoint of the slice port
// of the same name; not-ready endpoints and other Services' slices are not used.
func TestResolve(t *testing.T) {
	ready, notReady, https, other := true, false, "https", "metrics"
	p1, p2 := int32(9443), int32(9090)
	srv := &fakeServer{objs: map[schema.GroupResource][]runtime.Object{
		{Resource: "services"}: {&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hook"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}, {Name: "metrics", Port: 90}}}}},
		{Group: "discovery.k8s.io", Resource: "endpointslices"}: {
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hook-a", Labels: map[string]string{discoveryv1.LabelServiceName: "hook"}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
					{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
				Ports: []discoveryv1.EndpointPort{{Name: &https, Port: &p1}, {Name: &other, Port: &p2}}},
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "else", Labels: map[string]string{discoveryv1.LabelServiceName: "else"}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}, Ports: []discoveryv1.EndpointPort{{Name: &https, Port: &p1}}},
		},
	}}
	c := newClient(srv)
	for i := 0; i < 10; i++ {
		got, err := c.resolve(context.Background(), &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "hook"})
		if err != nil || got != "10.0.0.2:9443" {
			t.Fatalf("resolve: %q %v", got, err)
		}
	}
	port := int32(90)
	if got, err := c.resolve(context.Background(), &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "hook", Port: &port}); err != nil || got != "10.0.0.2:9090" {
		t.Errorf("resolve port 90: %q %v", got, err)
	}
	port = 1
	if _, err := c.resolve(context.Background(), &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "hook", Port: &port}); err == nil {
		t.Error("a port the Service lacks resolved")
	}
	if _, err := c.resolve(context.Background(), &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "missing"}); err == nil {
		t.Error("a missing Service resolved")
	}
}

// TestRuleMatches: operations, groups, versions, resource and subresource
// wildcards and scopes as upstream's matcher.
func TestRuleMatches(t *testing.T) {
	ns, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	rule := func(res string, scope *admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"", "apps"}, APIVersions: []string{"*"}, Resources: []string{res}, Scope: scope}}
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	attach := &admission.Attributes{Resource: pods, Subresource: "attach", Operation: admission.Connect, Namespace: "x"}
	create := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "x"}
	for _, tc := range []struct {
		rule admissionregistrationv1.RuleWithOperations
		a    *admission.Attributes
		want bool
	}{
		{rule("pods", nil, "CREATE"), create, true},
		{rule("pods", nil, "UPDATE"), create, false},
		{rule("pods", nil, "*"), create, true},
		{rule("*", nil, "*"), create, true},
		{rule("*", nil, "*"), attach, false},
		{rule("pods/attach", nil, "CONNECT"), attach, true},
		{rule("pods/*", nil, "CONNECT"), attach, true},
		{rule("*/attach", nil, "CONNECT"), attach, true},
		{rule("*/*", nil, "*"), attach, true},
		{rule("pods", &ns, "CREATE"), create, true},
		{rule("pods", &cluster, "CREATE"), create, false},
		{rule("deployments", nil, "CREATE"), create, false},
	} {
		if got := ruleMatches(tc.rule, tc.a, tc.a.Resource); got != tc.want {
			t.Errorf("%v on %s/%s %s: %v, want %v", tc.rule.Resources, tc.a.Resource.Resource, tc.a.Subresource, tc.a.Operation, got, tc.want)
		}
	}
}
