package webhookclient

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeServer serves fixed objects by group-resource.
type fakeServer struct {
	objs map[schema.GroupResource][]runtime.Object
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
	c := New(srv)
	for i := 0; i < 10; i++ {
		got, err := c.resolve(context.Background(), &Service{Namespace: "ns", Name: "hook"})
		if err != nil || got != "10.0.0.2:9443" {
			t.Fatalf("resolve: %q %v", got, err)
		}
	}
	port := int32(90)
	if got, err := c.resolve(context.Background(), &Service{Namespace: "ns", Name: "hook", Port: &port}); err != nil || got != "10.0.0.2:9090" {
		t.Errorf("resolve port 90: %q %v", got, err)
	}
	port = 1
	if _, err := c.resolve(context.Background(), &Service{Namespace: "ns", Name: "hook", Port: &port}); err == nil {
		t.Error("a port the Service lacks resolved")
	}
	if _, err := c.resolve(context.Background(), &Service{Namespace: "ns", Name: "missing"}); err == nil {
		t.Error("a missing Service resolved")
	}
}
