package podendpoint

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func lister(t *testing.T, svcs ...*corev1.Service) corelisters.ServiceLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewServiceLister(idx)
}

func svc(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Selector: selector}}
}

func pod(rv string, lbls map[string]string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: rv, Labels: lbls},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestServicesToSync(t *testing.T) {
	l := lister(t, svc("web", map[string]string{"app": "web"}), svc("api", map[string]string{"app": "api"}),
		svc("all", map[string]string{}), svc("manual", nil))
	web, api := map[string]string{"app": "web"}, map[string]string{"app": "api"}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		want     []string
	}{
		{"resync", pod("1", web, true), pod("1", web, false), nil},
		{"irrelevant change", pod("1", web, true), pod("2", web, true), nil},
		{"readiness", pod("1", web, true), pod("2", web, false), []string{"ns/all", "ns/web"}},
		{"relabelled", pod("1", web, true), pod("2", api, true), []string{"ns/api", "ns/web"}},
		{"relabelled and not ready", pod("1", web, true), pod("2", api, false), []string{"ns/all", "ns/api", "ns/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ServicesToSync(l, tc.old, tc.cur)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFindPortAndIPs(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
		{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "dns-tcp", ContainerPort: 5353, Protocol: corev1.ProtocolTCP},
	}}}}, Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}}}
	if n, err := FindPort(p, &corev1.ServicePort{TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolUDP}); err != nil || n != 53 {
		t.Errorf("dns/UDP: %d, %v", n, err)
	}
	if _, err := FindPort(p, &corev1.ServicePort{TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolTCP}); err == nil {
		t.Error("dns/TCP resolved")
	}
	if n, _ := FindPort(p, &corev1.ServicePort{TargetPort: intstr.FromInt32(8080)}); n != 8080 {
		t.Errorf("numeric port %d", n)
	}
	if IPOfFamily(p, corev1.IPv6Protocol) != "fd00::1" || IPOfFamily(p, corev1.IPv4Protocol) != "10.0.0.1" {
		t.Error("IPs by family")
	}
	p.DeletionTimestamp = ptr.To(metav1.Now())
	if ShouldPodBeInEndpoints(p, false) || !ShouldPodBeInEndpoints(p, true) {
		t.Error("terminating pod")
	}
}
