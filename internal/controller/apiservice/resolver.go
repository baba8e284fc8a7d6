package apiservice

import (
	"errors"
	"fmt"
	"net/url"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/kubette/kubette/internal/serviceendpoint"
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
	slices, err := r.EndpointSlices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return nil, err
	}
	hostPort, err := serviceendpoint.Pick(svc, slices, port)
	switch {
	case errors.Is(err, serviceendpoint.ErrNoPort):
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", port, name))
	case err != nil:
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	return &url.URL{Scheme: "https", Host: hostPort}, nil
}
