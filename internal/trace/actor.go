package trace

import "strings"

// Participants every flow has.
const (
	APIServer = "API server"
	Etcd      = "etcd"
)

// Component names the diagrams give the node and add-on components.
const (
	Scheduler         = "scheduler"
	KubeProxy         = "kube-proxy"
	IngressController = "ingress-controller"
	DNS               = "dns"
)

// RuntimeController is the reportingController of the built-in runtime's Events (its
// steps: CNI ADD, runc create, start, kill, delete), reported per node.
const RuntimeController = "kubette-runtime"

// runtimeUserPrefix begins the user of a node's runtime (system:kubette-runtime:<node>).
const runtimeUserPrefix = "system:kubette-runtime:"

// Runtime is the participant of a node's runtime: runtime/<node>, beside kubelet/<node>.
func Runtime(node string) string { return "runtime/" + node }

// runtimeNode returns the node of a runtime participant.
func runtimeNode(actor string) (string, bool) { return strings.CutPrefix(actor, "runtime/") }

// clientNames maps the names kube-controller-manager gives its controllers' clients
// (the last element of their User-Agent, or the service account they run as) to the
// component the diagrams show: the name its Events report, so that a controller's
// requests and its Events share one participant.
var clientNames = map[string]string{
	"deployment-controller":      "deployment-controller",
	"replicaset-controller":      "replicaset-controller",
	"endpoint-controller":        "endpoint-controller",
	"endpointslice-controller":   "endpointslice-controller",
	"generic-garbage-collector":  "garbage-collector-controller",
	"namespace-controller":       "namespace-controller",
	"service-account-controller": "service-account-controller",
	"replication-controller":     "replication-controller",
	"root-ca-cert-publisher":     "root-ca-cert-publisher",
	"resourcequota-controller":   "resourcequota-controller",
	// Its Events report endpoint-slice-mirroring-controller.
	"endpointslicemirroring-controller": "endpoint-slice-mirroring-controller",
}

// writerByResource names the controller of kube-controller-manager that writes a
// resource in the flows the trace draws, for requests whose client does not name its
// controller (a controller manager that shares one client between its controllers).
var writerByResource = map[string]string{
	"deployments.apps":                "deployment-controller",
	"replicasets.apps":                "deployment-controller",
	"pods":                            "replicaset-controller",
	"endpointslices.discovery.k8s.io": "endpointslice-controller",
	"endpoints":                       "endpoint-controller",
	"serviceaccounts":                 "service-account-controller",
	"namespaces":                      "namespace-controller",
}

// watcherByResource names the controller whose reaction to a watch event of the resource
// the flows show: the ReplicaSet controller acts on a new ReplicaSet, the Deployment
// controller on a Deployment. Watches go through informers shared by every controller
// (User-Agent .../shared-informers, as upstream), so the resource is what tells them apart.
var watcherByResource = map[string]string{
	"deployments.apps":                "deployment-controller",
	"replicasets.apps":                "replicaset-controller",
	"pods":                            "replicaset-controller",
	"endpointslices.discovery.k8s.io": "endpointslice-controller",
	"services":                        "endpointslice-controller",
	"endpoints":                       "endpoint-controller",
	"serviceaccounts":                 "service-account-controller",
	"namespaces":                      "namespace-controller",
}

// userAgentComponents maps the last element of a User-Agent to the component, for
// components that run with credentials that do not name them (an admin kubeconfig).
var userAgentComponents = map[string]string{
	"scheduler":         Scheduler,
	"kube-scheduler":    Scheduler,
	"kubette-scheduler": Scheduler,
	"kube-proxy":        KubeProxy,
	"ingress-nginx":     IngressController,
	"kubette-ingress":   IngressController,
	"dns":               DNS,
	"kubette-dns":       DNS,
}

// Actor names the component behind a request or a watch: kubectl, deployment-controller,
// scheduler, kubelet/node-1, ... from the authenticated user (certificate common name or
// service account), the User-Agent, the fieldManager and the resource. delivery says the
// record is a watch event delivered to that watcher rather than a request it made.
//
// Each controller of the controller manager has its own client whose User-Agent ends in
// the controller's name, as upstream's (…kubernetes/<commit>/deployment-controller, or
// …/system:serviceaccount:kube-system:deployment-controller with service-account
// credentials); requests without one, and watches (shared informers), fall back to the
// controller that writes or watches the resource.
func Actor(user, userAgent, fieldManager, resource, subresource string, delivery bool) string {
	product := userAgent
	if i := strings.IndexByte(product, '/'); i >= 0 {
		product = product[:i]
	}
	last := userAgent
	if i := strings.LastIndexByte(last, '/'); i >= 0 {
		last = last[i+1:]
	}
	if sa, ok := strings.CutPrefix(last, "system:serviceaccount:kube-system:"); ok {
		last = sa
	}
	switch {
	case strings.HasPrefix(user, "system:node:"):
		return "kubelet/" + strings.TrimPrefix(user, "system:node:")
	case strings.HasPrefix(user, runtimeUserPrefix):
		return Runtime(strings.TrimPrefix(user, runtimeUserPrefix))
	case user == "system:kube-scheduler":
		return Scheduler
	case user == "system:kube-proxy" || user == "system:serviceaccount:kube-system:kube-proxy":
		return KubeProxy
	case user == "system:kubette-ingress-controller":
		return IngressController
	case user == "system:kubette-dns":
		return DNS
	case strings.HasPrefix(user, "system:serviceaccount:kube-system:") && clientNames[strings.TrimPrefix(user, "system:serviceaccount:kube-system:")] != "":
		return clientNames[strings.TrimPrefix(user, "system:serviceaccount:kube-system:")]
	case user == "system:kube-controller-manager" || clientNames[last] != "" || last == "kube-controller-manager" || last == "shared-informers":
		if c := clientNames[last]; c != "" {
			return c
		}
		if strings.HasSuffix(fieldManager, "-controller") {
			return fieldManager
		}
		table := writerByResource
		if subresource == "status" && resource == "replicasets.apps" {
			return "replicaset-controller" // a ReplicaSet's status is its own controller's
		}
		if delivery {
			table = watcherByResource
		}
		if c, ok := table[resource]; ok {
			return c
		}
		return "controller-manager"
	case userAgentComponents[last] != "":
		return userAgentComponents[last]
	case strings.HasPrefix(user, "system:serviceaccount:"):
		return strings.TrimPrefix(user, "system:serviceaccount:")
	case strings.HasPrefix(product, "kubectl"):
		return "kubectl"
	case user == "kube-apiserver" || fieldManager == "kube-apiserver":
		return APIServer
	case product != "":
		return product
	case user != "":
		return user
	}
	return "unknown"
}

// EventActor names the component that reported an Event: its reporting controller or
// source component, with the kubelet's host.
func EventActor(component, host string) string {
	switch component {
	case "kubelet":
		if host != "" {
			return "kubelet/" + host
		}
	case "default-scheduler", "kube-scheduler", "kubette-scheduler":
		return Scheduler
	case "endpoint-slice-controller":
		return "endpointslice-controller" // upstream's Event source; its client is endpointslice-controller
	case "kubette-ingress", "ingress-nginx", "nginx-ingress-controller":
		return IngressController
	case RuntimeController:
		if host != "" {
			return Runtime(host)
		}
	}
	if component == "" {
		return "unknown"
	}
	return component
}
