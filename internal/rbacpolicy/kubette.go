package rbacpolicy

import rbacv1 "k8s.io/api/rbac/v1"

// Kubette is the policy of kubette's own components that have no upstream counterpart
// with a bootstrap role: the DNS server (which watches Services and EndpointSlices, as
// CoreDNS's role in kubeadm allows), the ingress controller (which serves Ingresses
// from Services, EndpointSlices and TLS Secrets, records Events, writes Ingress status
// and creates its IngressClass) and the nodes' runtimes (which record Events); and
// metrics-server's aggregated role of the metrics.k8s.io API kubette serves.
func Kubette() Policy {
	p := Policy{}
	for _, d := range []roleDef{
		{name: DNSUser, rules: []rule{
			r("list watch", "core", "endpoints namespaces pods services"),
			r("list watch", "discovery.k8s.io", "endpointslices"),
		}},
		{name: IngressUser, rules: []rule{
			r("read", "core", "configmaps endpoints namespaces nodes pods secrets services"),
			r("read", "networking.k8s.io", "ingresses ingressclasses"),
			r("create", "networking.k8s.io", "ingressclasses"),
			r("update", "networking.k8s.io", "ingresses/status"),
			r("read", "discovery.k8s.io", "endpointslices"),
			eventsRule(),
		}},
	} {
		p.ClusterRoles = append(p.ClusterRoles, d.build())
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, clusterRoleBinding(d.name, d.name, user(d.name)))
	}
	// The resource metrics API (kubette's stand-in for metrics-server) gets
	// metrics-server's aggregated reader role: view, edit and admin may read it.
	p.ClusterRoles = append(p.ClusterRoles, metricsReader())
	// Each node's runtime (system:kubette-runtime:<node>) reports its steps as Events.
	runtime := roleDef{name: RuntimeRole, rules: []rule{eventsRule()}}
	p.ClusterRoles = append(p.ClusterRoles, runtime.build())
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, clusterRoleBinding(RuntimeRole, RuntimeRole, group(RuntimeGroup)))
	return p
}

const (
	// DNSUser is the user (and the role) of kubette's DNS server.
	DNSUser = "system:kubette-dns"
	// IngressUser is the user (and the role) of kubette's ingress controller.
	IngressUser = "system:kubette-ingress-controller"
	// RuntimeRole is the role of every node's runtime; RuntimeGroup their group.
	RuntimeRole  = "system:kubette-runtime"
	RuntimeGroup = "system:kubette-runtimes"
)

// MetricsReaderRole is metrics-server's aggregated role of metrics.k8s.io.
const MetricsReaderRole = "system:aggregated-metrics-reader"

// metricsReader is metrics-server's system:aggregated-metrics-reader: read NodeMetrics
// and PodMetrics, aggregated into view, edit and admin.
func metricsReader() rbacv1.ClusterRole {
	c := roleDef{name: MetricsReaderRole, aggregateTo: "aggregate-to-view", rules: []rule{
		r("read", "metrics.k8s.io", "pods nodes"),
	}}.build()
	c.Labels[aggregatePrefix+"aggregate-to-edit"] = "true"
	c.Labels[aggregatePrefix+"aggregate-to-admin"] = "true"
	return c
}
