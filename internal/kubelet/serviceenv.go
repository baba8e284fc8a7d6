package kubelet

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// masterService is the Service of the default namespace whose variables every pod gets, even
// with enableServiceLinks false (in-cluster clients find the API server by them).
const masterService = "kubernetes"

// serviceEnv lists the Docker-links style variables of the Services a pod in namespace ns
// sees, as upstream's kubelet: with enableServiceLinks every Service of ns with a ClusterIP,
// and always the default namespace's kubernetes Service (a Service of that name in ns wins).
// The Services go in name order, each one's variables in upstream's order.
func serviceEnv(lister corelisters.ServiceLister, ns string, enableServiceLinks bool) ([]v1.EnvVar, error) {
	if lister == nil {
		return nil, nil
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
	}
	byName := map[string]*v1.Service{}
	for _, s := range all {
		if !serviceIPSet(s) {
			continue
		}
		switch {
		case s.Namespace == ns && enableServiceLinks:
			byName[s.Name] = s
		case s.Namespace == metav1.NamespaceDefault && s.Name == masterService:
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []v1.EnvVar
	for _, n := range names {
		out = append(out, serviceVars(byName[n])...)
	}
	return out, nil
}

// serviceIPSet tells whether a Service has a ClusterIP (not headless, not ExternalName).
func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone && len(s.Spec.Ports) > 0
}

// serviceVars are one Service's variables: {NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT (the
// first port) and {NAME}_SERVICE_PORT_{PORTNAME} for each named port, then the Docker link
// variables {NAME}_PORT (the first port's URL) and, per port, {NAME}_PORT_{port}_{PROTO} with
// its _PROTO, _PORT and _ADDR.
func serviceVars(s *v1.Service) []v1.EnvVar {
	prefix := envName(s.Name)
	ip := s.Spec.ClusterIP
	out := []v1.EnvVar{
		{Name: prefix + "_SERVICE_HOST", Value: ip},
		{Name: prefix + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out = append(out, v1.EnvVar{Name: prefix + "_SERVICE_PORT_" + envName(p.Name), Value: strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		port := strconv.Itoa(int(p.Port))
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			out = append(out, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out = append(out,
			v1.EnvVar{Name: pp, Value: url},
			v1.EnvVar{Name: pp + "_PROTO", Value: strings.ToLower(proto)},
			v1.EnvVar{Name: pp + "_PORT", Value: port},
			v1.EnvVar{Name: pp + "_ADDR", Value: ip},
		)
	}
	return out
}

// envName turns a Service or port name into a variable name: upper case, '-' as '_'.
func envName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
