package trace

import "strings"

// Participants every flow has.
const (
	APIServer = "API server"
	Etcd      = "etcd"
)

// writerByResource names the controller of kube-controller-manager that writes (or
// watches, for deliveries) a resource in the flows the trace draws. All controllers
// share one client and one User-Agent, so the resource is what tells them apart.
var writerByResource = map[string]string{
	"deployments.apps":                "deployment-controller",
	"replicasets.apps":                "deployment-controller",
	"pods":                            "replicaset-controller",
	"endpointslices.discovery.k8s.io": "endpointslice-controller",
	"endpoints":                       "endpoints-controller",
	"serviceaccounts":                 "serviceaccount-controller",
	"namespaces":                      "namespace-controller",
}

// watcherByResource names the controller whose reaction to a watch event of the resource
// the flows show: the ReplicaSet controller acts on a new ReplicaSet, the Deployment
// controller on a Deployment.
var watcherByResource = map[string]string{
	"deployments.apps":                "deployment-controller",
	"replicasets.apps":                "replicaset-controller",
	"pods":                            "replicaset-controller",
	"endpointslices.discovery.k8s.io": "endpointslice-controller",
	"services":                        "endpointslice-controller",
	"serviceaccounts":                 "serviceaccount-controller",
	"namespaces":                      "namespace-controller",
}

// Actor names the component behind a request or a watch: kubectl, deployment-controller,
// scheduler, kubelet/node-1, ... from the authenticated user (certificate common name),
// the User-Agent, the fieldManager and the resource. delivery says the record is a watch
// event delivered to that watcher rather than a request it made.
func Actor(user, userAgent, fieldManager, resource, subresource string, delivery bool) string {
	product := userAgent
	if i := strings.IndexByte(product, '/'); i >= 0 {
		product = product[:i]
	}
	switch {
	case strings.HasPrefix(user, "system:node:"):
		return "kubelet/" + strings.TrimPrefix(user, "system:node:")
	case user == "system:kube-scheduler":
		return "scheduler"
	case user == "system:kube-proxy":
		return "proxy"
	case user == "system:kube-controller-manager" || strings.HasSuffix(userAgent, "/kube-controller-manager"):
		if i := strings.LastIndexByte(userAgent, '/'); i >= 0 && strings.HasSuffix(userAgent, "-controller") {
			return userAgent[i+1:]
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
		return "scheduler"
	}
	if component == "" {
		return "unknown"
	}
	return component
}
