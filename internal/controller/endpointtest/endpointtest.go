// Package endpointtest holds what the unit tests of the two endpoint
// controllers (Endpoints and EndpointSlice) share: the Services and Pods they
// sync, the loading of those objects into informer indexers, and a short
// description of the writes a fake clientset recorded. Only tests import it.
package endpointtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// Namespace is the namespace of every test object.
const Namespace = "default"

// Now is the time of the pods' readiness transitions; Services were created
// an hour before.
func Now() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

// ServiceOption changes a Service built by Service.
type ServiceOption func(*corev1.Service)

// Service returns a Service selecting app=name with ClusterIP 10.0.0.10 and two
// ports: http (80 → the named port "http") and metrics (9090 → 9100).
func Service(name string, opts ...ServiceOption) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID(name + "-uid"),
			Labels: map[string]string{"team": "web"}, CreationTimestamp: metav1.NewTime(Now().Add(-time.Hour))},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": name},
			ClusterIP:  "10.0.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
				{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9100)},
			},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// PodOption changes a Pod built by Pod.
type PodOption func(*corev1.Pod)

// Pod returns a running, ready pod called name, labelled app=app, on node-a
// with IP 10.1.<n/250>.<n%250+1>, whose container names port 8080 "http".
func Pod(name, app string, n int, opts ...PodOption) *corev1.Pod {
	ip := fmt.Sprintf("10.1.%d.%d", n/250, n%250+1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID(name + "-uid"),
			Labels: map[string]string{"app": app}, ResourceVersion: "1"},
		Spec: corev1.PodSpec{
			NodeName: "node-a",
			Containers: []corev1.Container{{Name: "app", Image: "example/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(Now())}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// NotReady makes the pod's Ready condition false.
func NotReady() PodOption {
	return func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
}

// Terminating gives the pod a deletion timestamp.
func Terminating() PodOption {
	return func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(Now())) }
}

// HTTPPort moves the pod's named port "http" to port.
func HTTPPort(port int32) PodOption {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = port }
}

// Preload adds objs to the indexers of factory's informers for their kind
// (Services, Pods, Nodes, Endpoints, EndpointSlices), as if they had been
// listed, so a controller's listers see them without running the informers.
func Preload(t *testing.T, factory informers.SharedInformerFactory, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Service:
			err = factory.Core().V1().Services().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.Node:
			err = factory.Core().V1().Nodes().Informer().GetIndexer().Add(o)
		case *corev1.Endpoints:
			err = factory.Core().V1().Endpoints().Informer().GetIndexer().Add(o)
		case *discoveryv1.EndpointSlice:
			err = factory.Discovery().V1().EndpointSlices().Informer().GetIndexer().Add(o)
		default:
			t.Fatalf("preload: unexpected %T", o)
		}
		if err != nil {
			t.Fatalf("preload %T: %v", o, err)
		}
	}
}

// Writes describes the creates, updates and deletes client recorded, in
// order, as "verb resource name"; a create of an object named by the API
// server from its generateName shows as "<generateName>*".
func Writes(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		var name string
		switch a := a.(type) {
		case core.CreateAction:
			o := a.GetObject().(metav1.Object)
			name = o.GetName()
			if name == "" {
				name = o.GetGenerateName() + "*"
			}
		case core.UpdateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case core.DeleteAction:
			name = a.GetName()
		default:
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+name)
	}
	return out
}

// WantWrites fails t unless client recorded exactly the writes want.
func WantWrites(t *testing.T, client *fake.Clientset, want ...string) {
	t.Helper()
	if got := Writes(client); !slices.Equal(got, want) {
		t.Fatalf("actions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
