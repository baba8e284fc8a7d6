package endpoints

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/controller/endpointslice/podendpoint"
)

// maxCapacity is the most addresses an Endpoints object lists.
const maxCapacity = 1000

// truncated is the value of the over-capacity annotation.
const truncated = "truncated"

// serviceFamily is the IP family of the addresses a Service's Endpoints list,
// as upstream: its first IP family, else that of its cluster IP, else (a
// legacy headless Service) that of the pod's IP.
func serviceFamily(svc *corev1.Service, pod *corev1.Pod) corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies[0]
	}
	ip := pod.Status.PodIP
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ip = svc.Spec.ClusterIP
	}
	if podendpoint.FamilyOf(ip) == corev1.IPv6Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// podAddress is the pod's address in the Service's Endpoints, or false when
// the pod has no IP of the Service's family.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	ip := podendpoint.IPOfFamily(pod, serviceFamily(svc, pod))
	if ip == "" {
		return corev1.EndpointAddress{}, false
	}
	a := corev1.EndpointAddress{
		IP:        ip,
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		node := pod.Spec.NodeName
		a.NodeName = &node
	}
	if podendpoint.ShouldSetHostname(pod, svc) {
		a.Hostname = pod.Spec.Hostname
	}
	return a, true
}

// addrKey identifies an address: its IP and the pod it belongs to.
// truncate keeps at most maxCapacity addresses, ready ones first, spread over
// the subsets in proportion to their sizes, as upstream; it reports whether
// anything was cut. Subsets left without addresses are dropped (the API
// rejects them).
func truncate(subsets []corev1.EndpointSubset) ([]corev1.EndpointSubset, bool) {
	ready, notReady := 0, 0
	for _, s := range subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= maxCapacity {
		return subsets, false
	}
	// Either ready addresses alone exceed the capacity (cut them, drop every
	// not-ready one), or all ready ones fit and not-ready ones share the rest.
	cutReady := ready > maxCapacity
	budget, total := maxCapacity-ready, notReady
	if cutReady {
		budget, total = maxCapacity, ready
	}
	left := budget
	for i := range subsets {
		s := &subsets[i]
		n := len(s.NotReadyAddresses)
		if cutReady {
			n = len(s.Addresses)
		}
		share := min(int(math.Ceil(float64(n)/float64(total)*float64(budget))), left)
		if cutReady {
			s.Addresses = s.Addresses[:min(share, len(s.Addresses))]
			s.NotReadyAddresses = nil
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(share, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	kept := subsets[:0]
	for _, s := range subsets {
		if len(s.Addresses)+len(s.NotReadyAddresses) > 0 {
			kept = append(kept, s)
		}
	}
	return kept, true
}
