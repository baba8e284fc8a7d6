package printers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// endpointSlicePrinter prints endpoint slices: NAME ADDRESSTYPE PORTS
// ENDPOINTS AGE.
func endpointSlicePrinter() Printer {
	// Descriptions come from discovery/v1beta1, as in kube-apiserver.
	doc := discoveryv1beta1.EndpointSlice{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("AddressType", "string", 0, doc["addressType"]),
			column("Ports", "string", 0, doc["ports"]),
			column("Endpoints", "string", 0, doc["endpoints"]),
			ageColumn(),
		},
		Row: rowFor(func(es *discoveryv1.EndpointSlice, now time.Time) []interface{} {
			return []interface{}{
				es.Name,
				string(es.AddressType),
				endpointSlicePorts(es.Ports),
				endpointSliceAddresses(es.Endpoints),
				translateTimestampSince(es.CreationTimestamp, now),
			}
		}),
	}
}

// endpointSlicePorts lists port numbers (the name for a port without a
// number, "*" for neither), at most three, or "<unset>" for none.
func endpointSlicePorts(ports []discoveryv1.EndpointPort) string {
	items := make([]string, 0, len(ports))
	for _, p := range ports {
		switch {
		case p.Port != nil:
			items = append(items, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			items = append(items, *p.Name)
		default:
			items = append(items, "*")
		}
	}
	return listWithMore(items)
}

// endpointSliceAddresses lists the endpoint addresses, at most three, or
// "<unset>" for none.
func endpointSliceAddresses(endpoints []discoveryv1.Endpoint) string {
	var items []string
	for _, ep := range endpoints {
		items = append(items, ep.Addresses...)
	}
	return listWithMore(items)
}

// listWithMore joins the first three items with commas, summarizing the
// others as " + N more..."; an empty list is "<unset>".
func listWithMore(items []string) string {
	if len(items) == 0 {
		return "<unset>"
	}
	if len(items) > moreLimit {
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:moreLimit], ","), len(items)-moreLimit)
	}
	return strings.Join(items, ",")
}

// ingressPrinter prints ingresses: NAME CLASS HOSTS ADDRESS PORTS AGE.
func ingressPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Class", "string", 0, "The name of the IngressClass resource that should be used for additional configuration"),
			column("Hosts", "string", 0, "Hosts that incoming requests are matched against before the ingress rule"),
			column("Address", "string", 0, "Address is a list containing ingress points for the load-balancer"),
			column("Ports", "string", 0, "Ports of TLS configurations that open"),
			ageColumn(),
		},
		Row: rowFor(func(ing *networkingv1.Ingress, now time.Time) []interface{} {
			class := "<none>"
			if ing.Spec.IngressClassName != nil {
				class = *ing.Spec.IngressClassName
			}
			ports := "80"
			if len(ing.Spec.TLS) > 0 {
				ports = "80, 443"
			}
			return []interface{}{
				ing.Name,
				class,
				ingressHosts(ing.Spec.Rules),
				ingressAddress(ing.Status.LoadBalancer.Ingress),
				ports,
				translateTimestampSince(ing.CreationTimestamp, now),
			}
		}),
	}
}

// ingressHosts lists the first three rule hosts ("*" when no rule names a
// host). Like kube-apiserver, the "+ N more..." count is the number of
// rules beyond the third, whether or not they name a host.
func ingressHosts(rules []networkingv1.IngressRule) string {
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == moreLimit {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	ret := strings.Join(hosts, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", ret, len(rules)-moreLimit)
	}
	return ret
}

// ingressAddress returns the sorted, deduplicated IPs (or hostnames where
// there is no IP) of the ingress load-balancer points, joined by commas.
func ingressAddress(points []networkingv1.IngressLoadBalancerIngress) string {
	set := sets.New[string]()
	for _, p := range points {
		if p.IP != "" {
			set.Insert(p.IP)
		} else if p.Hostname != "" {
			set.Insert(p.Hostname)
		}
	}
	return strings.Join(sets.List(set), ",")
}

// ingressClassPrinter prints ingress classes: NAME CONTROLLER PARAMETERS AGE.
func ingressClassPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Controller", "string", 0, "Controller that is responsible for handling this class"),
			column("Parameters", "string", 0, "A reference to a resource with additional parameters"),
			ageColumn(),
		},
		Row: rowFor(func(ic *networkingv1.IngressClass, now time.Time) []interface{} {
			params := "<none>"
			if p := ic.Spec.Parameters; p != nil {
				params = p.Kind
				if p.APIGroup != nil {
					params += "." + *p.APIGroup
				}
				params += "/" + p.Name
			}
			return []interface{}{ic.Name, ic.Spec.Controller, params, translateTimestampSince(ic.CreationTimestamp, now)}
		}),
	}
}
