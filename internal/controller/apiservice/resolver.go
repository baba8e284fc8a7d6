package apiservice

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// Resolver sends an APIService's requests to one ready endpoint of its Service
// (upstream's aggregator routing by endpoints, --enable-aggregator-routing: the API
// server reaches pods on this machine directly, not through a cluster IP), or to the
// name of an ExternalName Service (as upstream's default cluster resolver does).
type Resolver struct {
	Services       corev1listers.ServiceLister
	EndpointSlices discoverylisters.EndpointSliceLister
}

// ResolveEndpoint returns the https URL of one ready endpoint of the Service's port.
func (r Resolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	svc, err := r.Services.Services(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return &url.URL{Scheme: "https", Host: net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port)))}, nil
	}
	var svcPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			svcPort = &svc.Spec.Ports[i]
			break
		}
	}
	if svcPort == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", port, name))
	}
	slices, err := r.EndpointSlices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return nil, err
	}
	var ready []string
	for _, es := range slices {
		target := int32(0)
		for _, p := range es.Ports {
			if p.Port != nil && (p.Name == nil && svcPort.Name == "" || p.Name != nil && *p.Name == svcPort.Name) {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if (ep.Conditions.Ready == nil || *ep.Conditions.Ready) && len(ep.Addresses) > 0 {
				ready = append(ready, net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(target))))
			}
		}
	}
	if len(ready) == 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	return &url.URL{Scheme: "https", Host: ready[rand.IntN(len(ready))]}, nil
}
