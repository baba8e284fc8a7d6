package apiservice

import (
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/util/proxy"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Resolver sends an APIService's requests to one ready endpoint of its Service, with
// k8s.io/apiserver's endpoint resolution (upstream's aggregator routing by endpoints,
// --enable-aggregator-routing: the API server reaches pods on this machine directly,
// not through a cluster IP), or to the name of an ExternalName Service (as upstream's
// default cluster resolver does).
type Resolver struct {
	Services       corev1listers.ServiceLister
	EndpointSlices proxy.EndpointSliceGetter
}

// ResolveEndpoint returns the https URL of one endpoint of the Service's port.
func (r Resolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	svc, err := r.Services.Services(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return proxy.ResolveCluster(r.Services, namespace, name, port)
	}
	return proxy.ResolveEndpoint(r.Services, r.EndpointSlices, namespace, name, port)
}
