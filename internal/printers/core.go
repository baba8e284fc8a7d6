package printers

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

const (
	// nodeRoleLabelPrefix marks a node role as node-role.kubernetes.io/<role>.
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
	// nodeRoleLabel carries a node role as its value (legacy).
	nodeRoleLabel = "kubernetes.io/role"
	// moreLimit is how many items list-like cells show before "+ N more...".
	moreLimit = 3
)

// nodePrinter prints nodes: NAME STATUS ROLES AGE VERSION | INTERNAL-IP
// EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
func nodePrinter() Printer {
	infoDoc := corev1.NodeSystemInfo{}.SwaggerDoc()
	statusDoc := corev1.NodeStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", 0, "The status of the node"),
			column("Roles", "string", 0, "The roles of the node"),
			ageColumn(),
			column("Version", "string", 0, infoDoc["kubeletVersion"]),
			column("Internal-IP", "string", 1, statusDoc["addresses"]),
			column("External-IP", "string", 1, statusDoc["addresses"]),
			column("OS-Image", "string", 1, infoDoc["osImage"]),
			column("Kernel-Version", "string", 1, infoDoc["kernelVersion"]),
			column("Container-Runtime", "string", 1, infoDoc["containerRuntimeVersion"]),
		},
		Row: rowFor(func(node *corev1.Node, now time.Time) []interface{} {
			roles := strings.Join(nodeRoles(node), ",")
			if roles == "" {
				roles = "<none>"
			}
			info := node.Status.NodeInfo
			return []interface{}{
				node.Name,
				nodeStatus(node),
				roles,
				translateTimestampSince(node.CreationTimestamp, now),
				info.KubeletVersion,
				nodeAddress(node, corev1.NodeInternalIP),
				nodeAddress(node, corev1.NodeExternalIP),
				orUnknown(info.OSImage),
				orUnknown(info.KernelVersion),
				orUnknown(info.ContainerRuntimeVersion),
			}
		}),
	}
}

// nodeStatus renders the Ready condition ("Ready", "NotReady", or "Unknown"
// when there is none), followed by ",SchedulingDisabled" for cordoned nodes.
func nodeStatus(node *corev1.Node) string {
	status := "Unknown"
	// The last Ready condition wins, as in kube-apiserver.
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			status = string(c.Type)
		} else {
			status = "Not" + string(c.Type)
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles returns the sorted roles of a node, taken from
// node-role.kubernetes.io/<role> label keys and kubernetes.io/role values.
func nodeRoles(node *corev1.Node) []string {
	roles := sets.New[string]()
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, nodeRoleLabelPrefix):
			if role := strings.TrimPrefix(k, nodeRoleLabelPrefix); role != "" {
				roles.Insert(role)
			}
		case k == nodeRoleLabel && v != "":
			roles.Insert(v)
		}
	}
	return sets.List(roles)
}

// nodeAddress returns the first address of the given type, or "<none>".
func nodeAddress(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// orUnknown returns s, or "<unknown>" when s is empty.
func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// namespacePrinter prints namespaces: NAME STATUS AGE.
func namespacePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", 0, "The status of the namespace"),
			ageColumn(),
		},
		Row: rowFor(func(ns *corev1.Namespace, now time.Time) []interface{} {
			return []interface{}{ns.Name, string(ns.Status.Phase), translateTimestampSince(ns.CreationTimestamp, now)}
		}),
	}
}

// servicePrinter prints services: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S)
// AGE | SELECTOR.
func servicePrinter() Printer {
	specDoc := corev1.ServiceSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", 0, specDoc["type"]),
			column("Cluster-IP", "string", 0, specDoc["clusterIP"]),
			column("External-IP", "string", 0, specDoc["externalIPs"]),
			column("Port(s)", "string", 0, specDoc["ports"]),
			ageColumn(),
			column("Selector", "string", 1, specDoc["selector"]),
		},
		Row: rowFor(func(svc *corev1.Service, now time.Time) []interface{} {
			clusterIP := svc.Spec.ClusterIP
			if len(svc.Spec.ClusterIPs) > 0 {
				clusterIP = svc.Spec.ClusterIPs[0]
			}
			ports := servicePorts(svc.Spec.Ports)
			if ports == "" {
				ports = "<none>"
			}
			return []interface{}{
				svc.Name,
				string(svc.Spec.Type),
				orNone(clusterIP),
				serviceExternalIP(svc),
				ports,
				translateTimestampSince(svc.CreationTimestamp, now),
				labels.FormatLabels(svc.Spec.Selector),
			}
		}),
	}
}

// serviceExternalIP renders the EXTERNAL-IP cell of a service: its external
// IPs, load-balancer ingress points ("<pending>" while there are none), or
// the external name. An unset type is treated as ClusterIP, its default.
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, "":
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		ips := loadBalancerIngress(svc.Status.LoadBalancer.Ingress)
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(append(ips, svc.Spec.ExternalIPs...), ",")
		}
		if len(ips) > 0 {
			return strings.Join(ips, ",")
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// loadBalancerIngress returns the sorted, deduplicated IPs (or hostnames
// where there is no IP) of load-balancer ingress points.
func loadBalancerIngress(ingress []corev1.LoadBalancerIngress) []string {
	points := sets.New[string]()
	for _, in := range ingress {
		if in.IP != "" {
			points.Insert(in.IP)
		} else if in.Hostname != "" {
			points.Insert(in.Hostname)
		}
	}
	return sets.List(points)
}

// servicePorts renders service ports as "80/TCP" or, with a node port,
// "80:30080/TCP", joined by commas. An unset protocol is shown as TCP, its
// default.
func servicePorts(ports []corev1.ServicePort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if p.NodePort > 0 {
			parts = append(parts, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, proto))
		} else {
			parts = append(parts, fmt.Sprintf("%d/%s", p.Port, proto))
		}
	}
	return strings.Join(parts, ",")
}

// endpointsPrinter prints endpoints: NAME ENDPOINTS AGE.
func endpointsPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Endpoints", "string", 0, corev1.Endpoints{}.SwaggerDoc()["subsets"]),
			ageColumn(),
		},
		Row: rowFor(func(ep *corev1.Endpoints, now time.Time) []interface{} {
			return []interface{}{ep.Name, formatEndpoints(ep), translateTimestampSince(ep.CreationTimestamp, now)}
		}),
	}
}

// formatEndpoints lists the first three "ip:port" pairs (bare IPs for
// subsets without ports) and summarizes the rest as "+ N more...". It
// returns "<none>" when there are no subsets.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var shown []string
	count := 0
	add := func(s string) {
		if len(shown) < moreLimit {
			shown = append(shown, s)
		}
		count++
	}
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			// Headless services may have no ports.
			for _, a := range ss.Addresses {
				add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	ret := strings.Join(shown, ",")
	if count > moreLimit {
		return fmt.Sprintf("%s + %d more...", ret, count-moreLimit)
	}
	return ret
}

// configMapPrinter prints config maps: NAME DATA AGE.
func configMapPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Data", "string", 0, corev1.ConfigMap{}.SwaggerDoc()["data"]),
			ageColumn(),
		},
		Row: rowFor(func(cm *corev1.ConfigMap, now time.Time) []interface{} {
			return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), translateTimestampSince(cm.CreationTimestamp, now)}
		}),
	}
}

// secretPrinter prints secrets: NAME TYPE DATA AGE.
func secretPrinter() Printer {
	doc := corev1.Secret{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", 0, doc["type"]),
			column("Data", "string", 0, doc["data"]),
			ageColumn(),
		},
		Row: rowFor(func(s *corev1.Secret, now time.Time) []interface{} {
			return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), translateTimestampSince(s.CreationTimestamp, now)}
		}),
	}
}

// serviceAccountPrinter prints service accounts: NAME SECRETS AGE.
func serviceAccountPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Secrets", "string", 0, corev1.ServiceAccount{}.SwaggerDoc()["secrets"]),
			ageColumn(),
		},
		Row: rowFor(func(sa *corev1.ServiceAccount, now time.Time) []interface{} {
			return []interface{}{sa.Name, int64(len(sa.Secrets)), translateTimestampSince(sa.CreationTimestamp, now)}
		}),
	}
}
