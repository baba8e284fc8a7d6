// Package podendpoint decides whether and how a pod is an endpoint of a
// Service, as upstream's endpointslice utilities do: which pods count, which
// port a service port resolves to on a pod, which of the pod's addresses
// serves a given IP family, and which Services a pod change concerns. Both the
// EndpointSlice and the Endpoints controllers use it.
package podendpoint

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubette/kubette/internal/controller/podstate"
)

// ShouldPodBeInEndpoints reports whether pod is an endpoint at all: it has an
// IP and is not in a terminal phase; a pod being deleted counts only with
// includeTerminating.
func ShouldPodBeInEndpoints(pod *corev1.Pod, includeTerminating bool) bool {
	if podstate.IsPodTerminal(pod) {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return includeTerminating || pod.DeletionTimestamp == nil
}

// ShouldSetHostname reports whether the pod's endpoint carries its hostname:
// the pod has one and its subdomain is the Service (in the same namespace).
func ShouldSetHostname(pod *corev1.Pod, svc *corev1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && svc.Namespace == pod.Namespace
}

// FindPort resolves the service port's target port on pod: a number is taken
// as is, a name is looked up among the ports of the pod's containers (and of
// its sidecar init containers) with the same protocol.
func FindPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, error) {
	tp := sp.TargetPort
	if tp.Type == intstr.Int {
		return int32(tp.IntValue()), nil
	}
	find := func(containers []corev1.Container, sidecarsOnly bool) (int32, bool) {
		for _, c := range containers {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == tp.StrVal && p.Protocol == sp.Protocol {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	}
	if port, ok := find(pod.Spec.Containers, false); ok {
		return port, nil
	}
	if port, ok := find(pod.Spec.InitContainers, true); ok {
		return port, nil
	}
	return 0, fmt.Errorf("pod %s/%s has no %s port named %q", pod.Namespace, pod.Name, sp.Protocol, tp.StrVal)
}

// PodIPs returns the pod's IPs, from status.podIPs or, when that is empty, status.podIP.
func PodIPs(pod *corev1.Pod) []string {
	if len(pod.Status.PodIPs) == 0 {
		if pod.Status.PodIP == "" {
			return nil
		}
		return []string{pod.Status.PodIP}
	}
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return ips
}

// FamilyOf returns the IP family of ip, or "" when ip is not an address.
func FamilyOf(ip string) corev1.IPFamily {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return ""
	case a.Is4() || a.Is4In6():
		return corev1.IPv4Protocol
	default:
		return corev1.IPv6Protocol
	}
}

// IPOfFamily returns the pod's first IP of family, or "".
func IPOfFamily(pod *corev1.Pod, family corev1.IPFamily) string {
	for _, ip := range PodIPs(pod) {
		if FamilyOf(ip) == family {
			return ip
		}
	}
	return ""
}

// ServicesForPod returns the keys ("namespace/name") of the Services in the
// pod's namespace whose selector selects the pod. Services without a selector
// select nothing.
func ServicesForPod(lister corelisters.ServiceLister, pod *corev1.Pod) (sets.Set[string], error) {
	keys := sets.New[string]()
	svcs, err := lister.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services of %s: %w", pod.Namespace, err)
	}
	for _, svc := range svcs {
		if svc.Spec.Selector == nil {
			continue
		}
		if labels.Set(svc.Spec.Selector).AsSelectorPreValidated().Matches(labels.Set(pod.Labels)) {
			keys.Insert(svc.Namespace + "/" + svc.Name)
		}
	}
	return keys, nil
}

// Changed reports whether a pod update changes the pod's endpoint (deletion,
// readiness, IPs, node, phase) and whether it may change which Services
// select it (labels, hostname or subdomain).
func Changed(oldPod, newPod *corev1.Pod) (endpointChanged, membershipChanged bool) {
	membershipChanged = !reflect.DeepEqual(oldPod.Labels, newPod.Labels) ||
		oldPod.Spec.Hostname != newPod.Spec.Hostname || oldPod.Spec.Subdomain != newPod.Spec.Subdomain
	endpointChanged = (oldPod.DeletionTimestamp == nil) != (newPod.DeletionTimestamp == nil) ||
		podstate.IsPodReady(oldPod) != podstate.IsPodReady(newPod) ||
		podstate.IsPodTerminal(oldPod) != podstate.IsPodTerminal(newPod) ||
		!reflect.DeepEqual(PodIPs(oldPod), PodIPs(newPod)) ||
		oldPod.Spec.NodeName != newPod.Spec.NodeName
	return endpointChanged, membershipChanged
}

// ServicesToSync returns the keys of the Services a pod update concerns,
// sorted: none for a resync or an irrelevant change; the current Services on
// an endpoint change; and, when the labels changed, those that gained or lost
// the pod (all of the old and new ones if the endpoint changed too).
func ServicesToSync(lister corelisters.ServiceLister, oldPod, newPod *corev1.Pod) ([]string, error) {
	if oldPod.ResourceVersion == newPod.ResourceVersion && oldPod.ResourceVersion != "" {
		return nil, nil
	}
	endpointChanged, membershipChanged := Changed(oldPod, newPod)
	if !endpointChanged && !membershipChanged {
		return nil, nil
	}
	cur, err := ServicesForPod(lister, newPod)
	if err != nil {
		return nil, err
	}
	if membershipChanged {
		old, err := ServicesForPod(lister, oldPod)
		if err != nil {
			return nil, err
		}
		if endpointChanged {
			cur = cur.Union(old)
		} else {
			cur = cur.SymmetricDifference(old)
		}
	}
	keys := cur.UnsortedList()
	sort.Strings(keys)
	return keys, nil
}
