package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// serviceStrategy is upstream's service strategy on the update side: the allocated
// addresses and node ports are carried over an update that leaves them out. Allocation
// itself is the Allocator the API server sets.
func serviceStrategy() Strategy {
	return typed(Strategy{PrepareForUpdate: func(obj, old runtime.Object) {
		svc, ok := obj.(*corev1.Service)
		cur, ok2 := old.(*corev1.Service)
		if ok && ok2 {
			keepServiceAllocations(svc, cur)
		}
	}})
}

// keepServiceAllocations carries the allocated cluster IPs and node ports over an update
// that leaves them out, as upstream does (a PUT built without reading them first).
func keepServiceAllocations(svc, cur *corev1.Service) {
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = cur.Spec.ClusterIP, cur.Spec.ClusterIPs
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = cur.Spec.IPFamilies
	}
	if svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = cur.Spec.HealthCheckNodePort
	}
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].NodePort != 0 {
			continue
		}
		for _, old := range cur.Spec.Ports {
			if old.Port == svc.Spec.Ports[i].Port && old.Protocol == svc.Spec.Ports[i].Protocol {
				svc.Spec.Ports[i].NodePort = old.NodePort
			}
		}
	}
}
