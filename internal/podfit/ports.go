package podfit

import (
	corev1 "k8s.io/api/core/v1"
)

// ProtocolPort is a host port with its protocol.
type ProtocolPort struct {
	Protocol string
	Port     int32
}

// HostPortInfo records the host ports in use on a node by IP.
type HostPortInfo map[string]map[ProtocolPort]struct{}

const anyIP = "0.0.0.0"

func normalizeHostPort(ip, protocol string) (string, string) {
	if ip == "" {
		ip = anyIP
	}
	if protocol == "" {
		protocol = string(corev1.ProtocolTCP)
	}
	return ip, protocol
}

// Add records a used port.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = normalizeHostPort(ip, protocol)
	if h[ip] == nil {
		h[ip] = map[ProtocolPort]struct{}{}
	}
	h[ip][ProtocolPort{protocol, port}] = struct{}{}
}

// AddPod records the host ports of a pod (HostPorts).
func (h HostPortInfo) AddPod(pod *corev1.Pod) {
	for _, p := range HostPorts(pod) {
		h.Add(p.HostIP, string(p.Protocol), p.HostPort)
	}
}

// Remove forgets a used port.
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = normalizeHostPort(ip, protocol)
	if m := h[ip]; m != nil {
		delete(m, ProtocolPort{protocol, port})
		if len(m) == 0 {
			delete(h, ip)
		}
	}
}

// CheckConflict reports whether ip:port/protocol collides with a used port; 0.0.0.0
// collides with every address.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 {
		return false
	}
	ip, protocol = normalizeHostPort(ip, protocol)
	pp := ProtocolPort{protocol, port}
	if ip == anyIP {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, key := range []string{ip, anyIP} {
		if _, ok := h[key][pp]; ok {
			return true
		}
	}
	return false
}

// PortsFit reports whether none of the wanted ports collides with a used one.
func PortsFit(want []corev1.ContainerPort, used HostPortInfo) bool {
	if len(used) == 0 {
		return true
	}
	for i := range want {
		if used.CheckConflict(want[i].HostIP, string(want[i].Protocol), want[i].HostPort) {
			return false
		}
	}
	return true
}

// HostPorts returns the ports with a hostPort of the pod's containers and of its
// restartable (sidecar) init containers, which run for the pod's whole life; as
// upstream's GetHostPorts.
func HostPorts(pod *corev1.Pod) []corev1.ContainerPort {
	var ports []corev1.ContainerPort
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			ports = appendHostPorts(ports, c.Ports)
		}
	}
	for i := range pod.Spec.Containers {
		ports = appendHostPorts(ports, pod.Spec.Containers[i].Ports)
	}
	return ports
}

func appendHostPorts(dst, ports []corev1.ContainerPort) []corev1.ContainerPort {
	for _, p := range ports {
		if p.HostPort > 0 {
			dst = append(dst, p)
		}
	}
	return dst
}
