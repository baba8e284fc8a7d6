// Package serviceendpoint picks where the API server sends a request addressed to a
// Service (a webhook, an aggregated API): one ready endpoint of the Service's port,
// found in its EndpointSlices (upstream's endpoint routing), or the name of an
// ExternalName Service. It is a pure function of the objects it is given.
package serviceendpoint

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ErrNoPort means the Service declares no port with the requested number.
var ErrNoPort = errors.New("no such service port")

// ErrNoEndpoints means no EndpointSlice of the Service has a ready endpoint for the port.
var ErrNoEndpoints = errors.New("no ready endpoints")

// Pick returns host:port of one ready endpoint of svc's port (chosen at random among
// them), from slices (the EndpointSlices labelled with svc's name; others are
// ignored), or the ExternalName's host with port for an ExternalName Service.
// The errors wrap ErrNoPort or ErrNoEndpoints, for callers to word as they must.
func Pick(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, port int32) (string, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	}
	var svcPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			svcPort = &svc.Spec.Ports[i]
			break
		}
	}
	if svcPort == nil {
		return "", ErrNoPort
	}
	var ready []string
	for _, es := range slices {
		if es.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		target := targetPort(es, svcPort.Name)
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
		return "", ErrNoEndpoints
	}
	return ready[rand.IntN(len(ready))], nil
}

// targetPort is the TCP port of es named as the Service's port (unnamed matches
// unnamed), or 0.
func targetPort(es *discoveryv1.EndpointSlice, name string) int32 {
	for _, p := range es.Ports {
		if p.Port == nil || p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Name == nil && name == "" || p.Name != nil && *p.Name == name {
			return *p.Port
		}
	}
	return 0
}
