package validation

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	annotationLoadBalancerSourceRanges = "service.beta.kubernetes.io/load-balancer-source-ranges"
	annotationTopologyMode             = "service.kubernetes.io/topology-mode"
	annotationTopologyAwareHints       = "service.kubernetes.io/topology-aware-hints"
	maxClientIPAffinitySeconds         = 86400
)

// validateServiceName validates a Service name as a DNS-1123 label (upstream's
// relaxed service name validation).
func validateServiceName(name string, prefix bool) []string {
	return apimachineryvalidation.NameIsDNSLabel(name, prefix)
}

// normalizeClusterIPs returns a copy of svc whose clusterIP and clusterIPs are
// reconciled the way upstream's service strategy does before validation, so
// that clients setting only the singular field validate like upstream.
func normalizeClusterIPs(svc, old *corev1.Service) *corev1.Service {
	out := svc.DeepCopy()
	if old == nil {
		if out.Spec.ClusterIP != "" && len(out.Spec.ClusterIPs) == 0 {
			out.Spec.ClusterIPs = []string{out.Spec.ClusterIP}
		}
		return out
	}
	sameIPs := func() bool {
		if len(out.Spec.ClusterIPs) != len(old.Spec.ClusterIPs) {
			return false
		}
		for i := range out.Spec.ClusterIPs {
			if out.Spec.ClusterIPs[i] != old.Spec.ClusterIPs[i] {
				return false
			}
		}
		return true
	}
	if len(old.Spec.ClusterIPs) > 0 && len(out.Spec.ClusterIPs) == 0 && old.Spec.ClusterIP == out.Spec.ClusterIP {
		out.Spec.ClusterIPs = old.Spec.ClusterIPs
	}
	if old.Spec.ClusterIP != out.Spec.ClusterIP {
		if old.Spec.ClusterIP != "" && out.Spec.ClusterIP == "" {
			if sameIPs() {
				out.Spec.ClusterIPs = nil
			}
		} else if sameIPs() {
			out.Spec.ClusterIPs = []string{out.Spec.ClusterIP}
		}
	}
	return out
}

func isHeadlessService(svc *corev1.Service) bool {
	return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func validateServiceCreate(svc *corev1.Service) field.ErrorList {
	errs := validateMeta(&svc.ObjectMeta, true, validateServiceName)
	return append(errs, validateServiceSpec(normalizeClusterIPs(svc, nil), nil)...)
}

func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(&svc.ObjectMeta, &old.ObjectMeta)
	n := normalizeClusterIPs(svc, old)
	errs = append(errs, validateUpgradeDowngradeClusterIPs(old, n)...)
	errs = append(errs, validateUpgradeDowngradeIPFamilies(old, n)...)
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && n.Spec.Type == corev1.ServiceTypeLoadBalancer {
		oc, nc := old.Spec.LoadBalancerClass, n.Spec.LoadBalancerClass
		if (oc == nil) != (nc == nil) || (oc != nil && *oc != *nc) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "loadBalancerClass"), nc, "may not change once set"))
		}
	}
	if needsHealthCheck(old) && needsHealthCheck(n) && old.Spec.HealthCheckNodePort != n.Spec.HealthCheckNodePort {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	return append(errs, validateServiceSpec(n, old)...)
}

// validateServiceSpec validates a (clusterIP-normalized) service.
func validateServiceSpec(svc *corev1.Service, old *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	metaPath := field.NewPath("metadata")
	specPath := field.NewPath("spec")
	spec := &svc.Spec

	hints, hintsSet := svc.Annotations[annotationTopologyAwareHints]
	mode, modeSet := svc.Annotations[annotationTopologyMode]
	if hintsSet && modeSet && hints != mode {
		errs = append(errs, field.Invalid(metaPath.Child("annotations").Key(annotationTopologyMode), mode, fmt.Sprintf("must match annotations[%s] when both are specified", annotationTopologyAwareHints)))
	}

	headless := isHeadlessService(svc)
	if len(spec.Ports) == 0 && !headless && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		if headless {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0], "may not be set to 'None' for LoadBalancer services"))
		}
	case corev1.ServiceTypeNodePort:
		if headless {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0], "may not be set to 'None' for NodePort services"))
		}
	case corev1.ServiceTypeExternalName:
		if len(spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// The CNAME may carry a trailing dot to mark it fully qualified.
		if cname := strings.TrimSuffix(spec.ExternalName, "."); cname != "" {
			errs = append(errs, validateDNS1123Subdomain(cname, specPath.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	}

	portsPath := specPath.Child("ports")
	names := map[string]bool{}
	for i := range spec.Ports {
		errs = append(errs, validateServicePort(&spec.Ports[i], len(spec.Ports) > 1, names, portsPath.Index(i))...)
	}
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}
	switch spec.SessionAffinity {
	case "":
		errs = append(errs, field.Required(specPath.Child("sessionAffinity"), ""))
	case corev1.ServiceAffinityClientIP:
		errs = append(errs, validateClientIPAffinityConfig(spec.SessionAffinityConfig, specPath.Child("sessionAffinityConfig"))...)
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(specPath.Child("sessionAffinityConfig"), fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	default:
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity, []corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}))
	}

	errs = append(errs, validateClusterIPsRelatedFields(svc, old)...)

	var oldExternalIPs []string
	if old != nil {
		oldExternalIPs = old.Spec.ExternalIPs
	}
	for i, ip := range spec.ExternalIPs {
		idxPath := specPath.Child("externalIPs").Index(i)
		if e := validation.IsValidIPForLegacyField(idxPath, ip, true, oldExternalIPs); len(e) != 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, validateNonSpecialIP(ip, idxPath)...)
		}
	}

	switch spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName:
	case "":
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}))
	}
	if spec.Type == corev1.ServiceTypeClusterIP {
		for i := range spec.Ports {
			if spec.Ports[i].NodePort != 0 {
				errs = append(errs, field.Forbidden(portsPath.Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	type protoPort struct {
		proto corev1.Protocol
		port  int32
	}
	nodePorts := map[protoPort]bool{}
	for i, p := range spec.Ports {
		if p.NodePort == 0 {
			continue
		}
		key := protoPort{p.Protocol, p.NodePort}
		if nodePorts[key] {
			errs = append(errs, field.Duplicate(portsPath.Index(i).Child("nodePort"), p.NodePort))
		}
		nodePorts[key] = true
	}
	ports := map[protoPort]bool{}
	for i, p := range spec.Ports {
		key := protoPort{p.Protocol, p.Port}
		if ports[key] {
			errs = append(errs, field.Duplicate(portsPath.Index(i), corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}))
		}
		ports[key] = true
	}

	if len(spec.LoadBalancerSourceRanges) > 0 {
		p := specPath.Child("LoadBalancerSourceRanges")
		if spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, v := range spec.LoadBalancerSourceRanges {
			errs = append(errs, validation.IsValidCIDR(p.Index(i), strings.TrimSpace(v))...)
		}
	} else if val, ok := svc.Annotations[annotationLoadBalancerSourceRanges]; ok {
		p := metaPath.Child("annotations").Key(annotationLoadBalancerSourceRanges)
		if spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		if val = strings.TrimSpace(val); val != "" {
			for _, v := range strings.Split(val, ",") {
				errs = append(errs, validation.IsValidCIDR(p, strings.TrimSpace(v))...)
			}
		}
	}
	if spec.AllocateLoadBalancerNodePorts != nil && spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		errs = append(errs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}
	if spec.LoadBalancerClass != nil {
		if spec.Type == corev1.ServiceTypeLoadBalancer {
			errs = append(errs, validateQualifiedName(*spec.LoadBalancerClass, specPath.Child("loadBalancerClass"))...)
		} else {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		}
	}

	// External traffic policy and health check node port.
	if !externallyAccessible(svc) {
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else if spec.ExternalTrafficPolicy == "" {
		errs = append(errs, field.Required(specPath.Child("externalTrafficPolicy"), ""))
	} else if spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster && spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy, []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
	}
	if !needsHealthCheck(svc) {
		if spec.HealthCheckNodePort != 0 {
			errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	} else if spec.HealthCheckNodePort == 0 {
		errs = append(errs, field.Required(specPath.Child("healthCheckNodePort"), ""))
	} else {
		for _, msg := range validation.IsValidPortNum(int(spec.HealthCheckNodePort)) {
			errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort, msg))
		}
	}

	// Internal traffic policy.
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			errs = append(errs, field.Required(specPath.Child("internalTrafficPolicy"), ""))
		}
	} else if p := *spec.InternalTrafficPolicy; p != corev1.ServiceInternalTrafficPolicyCluster && p != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(specPath.Child("internalTrafficPolicy"), p, []corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}

	if td := spec.TrafficDistribution; td != nil {
		switch *td {
		case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode:
		default:
			errs = append(errs, field.NotSupported(specPath.Child("trafficDistribution"), *td, []string{corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}))
		}
	}
	return errs
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && sp.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else if sp.Name != "" {
		errs = append(errs, validateDNS1123Label(sp.Name, fldPath.Child("name"))...)
		if names[sp.Name] {
			errs = append(errs, field.Duplicate(fldPath.Child("name"), sp.Name))
		} else {
			names[sp.Name] = true
		}
	}
	for _, msg := range validation.IsValidPortNum(int(sp.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), sp.Port, msg))
	}
	if sp.Protocol == "" {
		errs = append(errs, field.Required(fldPath.Child("protocol"), ""))
	} else if !isSupportedPortProtocol(sp.Protocol) {
		errs = append(errs, field.NotSupported(fldPath.Child("protocol"), sp.Protocol, supportedPortProtocols()))
	}
	errs = append(errs, validatePortNumOrName(sp.TargetPort, fldPath.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*sp.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

func validateClientIPAffinityConfig(cfg *corev1.SessionAffinityConfig, fldPath *field.Path) field.ErrorList {
	detail := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
	if cfg == nil {
		return field.ErrorList{field.Required(fldPath, detail)}
	}
	if cfg.ClientIP == nil {
		return field.ErrorList{field.Required(fldPath.Child("clientIP"), detail)}
	}
	if cfg.ClientIP.TimeoutSeconds == nil {
		return field.ErrorList{field.Required(fldPath.Child("clientIP").Child("timeoutSeconds"), detail)}
	}
	if t := *cfg.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
		return field.ErrorList{field.Invalid(fldPath.Child("clientIP").Child("timeoutSeconds"), t, fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds))}
	}
	return nil
}

// validateClusterIPsRelatedFields validates clusterIP(s), ipFamilies and
// ipFamilyPolicy (all three are left unset by ExternalName services).
func validateClusterIPsRelatedFields(svc, old *corev1.Service) field.ErrorList {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	ipsPath := specPath.Child("clusterIPs")
	familiesPath := specPath.Child("ipFamilies")

	if spec.ClusterIP != "" {
		if len(spec.ClusterIPs) == 0 {
			errs = append(errs, field.Required(ipsPath, ""))
		} else if spec.ClusterIPs[0] != spec.ClusterIP {
			errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(spec.ClusterIPs) != 0 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}

	seen := map[corev1.IPFamily]bool{}
	for i, family := range spec.IPFamilies {
		if family != corev1.IPv4Protocol && family != corev1.IPv6Protocol {
			errs = append(errs, field.NotSupported(familiesPath.Index(i), family, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		}
		if seen[family] {
			errs = append(errs, field.Duplicate(familiesPath.Index(i), family))
		}
		seen[family] = true
	}
	if p := spec.IPFamilyPolicy; p != nil {
		switch *p {
		case corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack:
		default:
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), p, []corev1.IPFamilyPolicy{corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicySingleStack}))
		}
	}

	var oldIPs []string
	if old != nil {
		oldIPs = old.Spec.ClusterIPs
	}
	invalid := false
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				invalid = true
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		e := validation.IsValidIPForLegacyField(ipsPath.Index(i), ip, true, oldIPs)
		invalid = invalid || len(e) != 0
		errs = append(errs, e...)
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	if invalid {
		return errs
	}
	if len(spec.ClusterIPs) > 1 && !isDualStack(spec.ClusterIPs[0], spec.ClusterIPs[1]) {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
	}
	if !isHeadlessService(svc) && len(spec.ClusterIPs) > 0 && len(spec.IPFamilies) > 0 {
		for i, ip := range spec.ClusterIPs {
			if i >= len(spec.IPFamilies) {
				break
			}
			fam, _ := ipFamilyOf(ip)
			if spec.IPFamilies[i] == corev1.IPv4Protocol && fam == 6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if spec.IPFamilies[i] == corev1.IPv6Protocol && fam != 6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return errs
}

// validateUpgradeDowngradeClusterIPs keeps allocated cluster IPs immutable
// (a secondary IP may be added or released), except to/from ExternalName.
func validateUpgradeDowngradeClusterIPs(old, svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isHeadlessService(old) && isHeadlessService(svc) {
		return nil
	}
	ipsPath := field.NewPath("spec", "clusterIPs")
	oldIPs, newIPs := old.Spec.ClusterIPs, svc.Spec.ClusterIPs
	switch {
	case len(oldIPs) == len(newIPs):
		for i := range oldIPs {
			if oldIPs[i] != newIPs[i] {
				errs = append(errs, field.Invalid(ipsPath.Index(i), newIPs, "may not change once set"))
			}
		}
	case len(oldIPs) > len(newIPs):
		if len(newIPs) == 0 {
			errs = append(errs, field.Invalid(ipsPath.Index(0), newIPs, "primary clusterIP can not be unset"))
		}
		if len(oldIPs) > 0 && len(newIPs) > 0 && newIPs[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(ipsPath.Index(0), newIPs, "may not change once set"))
		}
		if len(newIPs) == 1 && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(oldIPs) > 0 && newIPs[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(ipsPath.Index(0), newIPs, "may not change once set"))
		}
	}
	return errs
}

func validateUpgradeDowngradeIPFamilies(old, svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isHeadlessService(old) || isHeadlessService(svc) {
		return nil
	}
	famPath := field.NewPath("spec", "ipFamilies")
	oldF, newF := old.Spec.IPFamilies, svc.Spec.IPFamilies
	switch {
	case len(oldF) == len(newF):
		for i := range oldF {
			if oldF[i] != newF[i] {
				errs = append(errs, field.Invalid(famPath.Index(0), newF, "may not change once set"))
			}
		}
	case len(oldF) > len(newF):
		if len(svc.Spec.ClusterIPs) == 0 {
			errs = append(errs, field.Invalid(famPath.Index(0), newF, "primary ipFamily can not be unset"))
		}
		if len(newF) > 0 && newF[0] != oldF[0] {
			errs = append(errs, field.Invalid(famPath.Index(0), svc.Spec.ClusterIPs, "may not change once set"))
		}
		if len(newF) == 1 && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(oldF) > 0 && len(newF) > 0 && newF[0] != oldF[0] {
			errs = append(errs, field.Invalid(famPath.Index(0), svc.Spec.ClusterIPs, "may not change once set"))
		}
	}
	return errs
}

func validateServiceStatusUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(&svc.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateLoadBalancerStatus(svc, old)...)
}

func validateLoadBalancerStatus(svc, old *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	ingPath := field.NewPath("status", "loadBalancer", "ingress")
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) != 0 {
		return field.ErrorList{field.Forbidden(ingPath, "may only be used when `spec.type` is 'LoadBalancer'")}
	}
	var oldIPs []string
	for _, ing := range old.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			oldIPs = append(oldIPs, ing.IP)
		}
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		idxPath := ingPath.Index(i)
		if ing.IP != "" {
			errs = append(errs, validation.IsValidIPForLegacyField(idxPath.Child("ip"), ing.IP, true, oldIPs)...)
		}
		switch {
		case ing.IPMode == nil && ing.IP != "":
			errs = append(errs, field.Required(idxPath.Child("ipMode"), "must be specified when `ip` is set"))
		case ing.IPMode != nil && ing.IP == "":
			errs = append(errs, field.Forbidden(idxPath.Child("ipMode"), "may not be specified when `ip` is not set"))
		case ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP && *ing.IPMode != corev1.LoadBalancerIPModeProxy:
			errs = append(errs, field.NotSupported(idxPath.Child("ipMode"), ing.IPMode, []corev1.LoadBalancerIPMode{corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP}))
		}
		errs = append(errs, validateLBHostname(ing.Hostname, idxPath.Child("hostname"))...)
	}
	return errs
}

func validateLBHostname(hostname string, fldPath *field.Path) field.ErrorList {
	if hostname == "" {
		return nil
	}
	errs := validateDNS1123Subdomain(hostname, fldPath)
	if _, err := netip.ParseAddr(hostname); err == nil {
		errs = append(errs, field.Invalid(fldPath, hostname, "must be a DNS name, not an IP address"))
	}
	return errs
}

// validateNonSpecialIP rejects unspecified, loopback and link-local addresses
// (endpoints and external IPs must be routable).
func validateNonSpecialIP(ip string, fldPath *field.Path) field.ErrorList {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return field.ErrorList{field.Invalid(fldPath, ip, "must be a valid IP address")}
	}
	addr = addr.Unmap()
	var errs field.ErrorList
	if addr.IsUnspecified() {
		errs = append(errs, field.Invalid(fldPath, ip, fmt.Sprintf("may not be unspecified (%v)", ip)))
	}
	if addr.IsLoopback() {
		errs = append(errs, field.Invalid(fldPath, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if addr.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(fldPath, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if addr.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(fldPath, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// Endpoints.

func validateEndpointsSpec(ep, old *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	var oldIPs []string
	if old != nil {
		for _, ss := range old.Subsets {
			for _, a := range ss.Addresses {
				oldIPs = append(oldIPs, a.IP)
			}
			for _, a := range ss.NotReadyAddresses {
				oldIPs = append(oldIPs, a.IP)
			}
		}
	}
	subsetsPath := field.NewPath("subsets")
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		idxPath := subsetsPath.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(idxPath, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], oldIPs, idxPath.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], oldIPs, idxPath.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, validateEndpointPort(&ss.Ports[j], len(ss.Ports) > 1, idxPath.Child("ports").Index(j))...)
		}
	}
	return errs
}

func validateEndpointAddress(addr *corev1.EndpointAddress, oldIPs []string, fldPath *field.Path) field.ErrorList {
	ipErrs := validation.IsValidIPForLegacyField(fldPath.Child("ip"), addr.IP, true, oldIPs)
	errs := ipErrs
	if addr.Hostname != "" {
		errs = append(errs, validateDNS1123Label(addr.Hostname, fldPath.Child("hostname"))...)
	}
	if addr.NodeName != nil {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *addr.NodeName, fldPath.Child("nodeName"))...)
	}
	if len(ipErrs) == 0 {
		errs = append(errs, validateNonSpecialIP(addr.IP, fldPath.Child("ip"))...)
	}
	return errs
}

func validateEndpointPort(port *corev1.EndpointPort, requireName bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && port.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else if port.Name != "" {
		errs = append(errs, validateDNS1123Label(port.Name, fldPath.Child("name"))...)
	}
	for _, msg := range validation.IsValidPortNum(int(port.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), port.Port, msg))
	}
	if port.Protocol == "" {
		errs = append(errs, field.Required(fldPath.Child("protocol"), ""))
	} else if !isSupportedPortProtocol(port.Protocol) {
		errs = append(errs, field.NotSupported(fldPath.Child("protocol"), port.Protocol, supportedPortProtocols()))
	}
	if port.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*port.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

// EndpointSlices.

const (
	maxEndpointSliceEndpoints = 1000
	maxEndpointSlicePorts     = 100
	maxEndpointAddresses      = 100
	maxTopologyLabels         = 16
)

func validateEndpointSliceSpec(slice, old *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	addrPath := field.NewPath("addressType")
	switch slice.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	case "":
		errs = append(errs, field.Required(addrPath, ""))
	default:
		// The deprecated "IP" type is tolerated on update only.
		if !(old != nil && slice.AddressType == "IP") {
			errs = append(errs, field.NotSupported(addrPath, slice.AddressType, []discoveryv1.AddressType{discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}))
		}
	}

	var oldAddrs []string
	if old != nil {
		for _, e := range old.Endpoints {
			oldAddrs = append(oldAddrs, e.Addresses...)
		}
	}
	epPath := field.NewPath("endpoints")
	if len(slice.Endpoints) > maxEndpointSliceEndpoints {
		errs = append(errs, field.TooMany(epPath, len(slice.Endpoints), maxEndpointSliceEndpoints))
	} else {
		for i, ep := range slice.Endpoints {
			idxPath := epPath.Index(i)
			aPath := idxPath.Child("addresses")
			if len(ep.Addresses) == 0 {
				errs = append(errs, field.Required(aPath, "must contain at least 1 address"))
			} else if len(ep.Addresses) > maxEndpointAddresses {
				errs = append(errs, field.TooMany(aPath, len(ep.Addresses), maxEndpointAddresses))
			}
			for j, addr := range ep.Addresses {
				errs = append(errs, validateSliceAddress(slice.AddressType, addr, oldAddrs, aPath.Index(j))...)
			}
			if ep.NodeName != nil {
				errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *ep.NodeName, idxPath.Child("nodeName"))...)
			}
			topoPath := idxPath.Child("deprecatedTopology")
			if len(ep.DeprecatedTopology) > maxTopologyLabels {
				errs = append(errs, field.TooMany(topoPath, len(ep.DeprecatedTopology), maxTopologyLabels))
			}
			errs = append(errs, metav1validation.ValidateLabels(ep.DeprecatedTopology, topoPath)...)
			if ep.Hostname != nil {
				errs = append(errs, validateDNS1123Label(*ep.Hostname, idxPath.Child("hostname"))...)
			}
		}
	}

	portsPath := field.NewPath("ports")
	if len(slice.Ports) > maxEndpointSlicePorts {
		return append(errs, field.TooMany(portsPath, len(slice.Ports), maxEndpointSlicePorts))
	}
	names := map[string]bool{}
	for i, p := range slice.Ports {
		idxPath := portsPath.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			errs = append(errs, validateDNS1123Label(name, idxPath.Child("name"))...)
		}
		if names[name] {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), name))
		} else {
			names[name] = true
		}
		if p.Protocol == nil {
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		} else if !isSupportedPortProtocol(*p.Protocol) {
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), *p.Protocol, supportedPortProtocols()))
		}
		if p.Port != nil {
			for _, msg := range validation.IsValidPortNum(int(*p.Port)) {
				errs = append(errs, field.Invalid(idxPath.Child("port"), *p.Port, msg))
			}
		}
		if p.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(*p.AppProtocol, idxPath.Child("appProtocol"))...)
		}
	}
	return errs
}

// validateSliceAddress validates one endpoint address against the slice's
// address type (unknown types are not validated, as upstream).
func validateSliceAddress(addrType discoveryv1.AddressType, addr string, oldAddrs []string, fldPath *field.Path) field.ErrorList {
	switch addrType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		errs := validation.IsValidIPForLegacyField(fldPath, addr, true, oldAddrs)
		if len(errs) != 0 {
			return errs
		}
		fam, _ := ipFamilyOf(addr)
		if addrType == discoveryv1.AddressTypeIPv4 && fam != 4 {
			return field.ErrorList{field.Invalid(fldPath, addr, "must be a valid IPv4 address")}
		}
		if addrType == discoveryv1.AddressTypeIPv6 && fam != 6 {
			return field.ErrorList{field.Invalid(fldPath, addr, "must be a valid IPv6 address")}
		}
		return validateNonSpecialIP(addr, fldPath)
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(fldPath, addr)
	case "IP":
		return validation.IsValidIPForLegacyField(fldPath, addr, true, oldAddrs)
	}
	return nil
}
