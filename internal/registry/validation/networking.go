package validation

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	annotationIngressClass       = "kubernetes.io/ingress.class"
	maxLenIngressClassController = 250
)

// ingressOptions relax rules for values already stored in an older object.
type ingressOptions struct {
	allowInvalidSecretName       bool
	allowInvalidWildcardHostRule bool
}

func validateIngressCreate(ing *networkingv1.Ingress) field.ErrorList {
	errs := validateMeta(&ing.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	errs = append(errs, validateIngressSpec(&ing.Spec, field.NewPath("spec"), ingressOptions{})...)
	if v, ok := ing.Annotations[annotationIngressClass]; ok && ing.Spec.IngressClassName != nil && v != *ing.Spec.IngressClassName {
		errs = append(errs, field.Invalid(field.NewPath("annotations").Child(annotationIngressClass), v, "must match `ingressClassName` when both are specified"))
	}
	return errs
}

func validateIngressUpdate(ing, old *networkingv1.Ingress) field.ErrorList {
	errs := validateMetaUpdate(&ing.ObjectMeta, &old.ObjectMeta)
	opts := ingressOptions{}
	for _, tls := range old.Spec.TLS {
		if len(validateTLSSecretName(tls.SecretName)) > 0 {
			opts.allowInvalidSecretName = true
		}
	}
	for i := range old.Spec.Rules {
		rule := &old.Spec.Rules[i]
		if strings.Contains(rule.Host, "*") && len(validateIngressRuleValue(&rule.IngressRuleValue, field.NewPath(""), ingressOptions{})) > 0 {
			opts.allowInvalidWildcardHostRule = true
		}
	}
	return append(errs, validateIngressSpec(&ing.Spec, field.NewPath("spec"), opts)...)
}

func validateIngressStatusUpdate(ing, old *networkingv1.Ingress) field.ErrorList {
	errs := validateMetaUpdate(&ing.ObjectMeta, &old.ObjectMeta)
	var oldIPs []string
	for _, in := range old.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			oldIPs = append(oldIPs, in.IP)
		}
	}
	p := field.NewPath("status", "loadBalancer", "ingress")
	for i, in := range ing.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			errs = append(errs, validation.IsValidIPForLegacyField(p.Index(i).Child("ip"), in.IP, true, oldIPs)...)
		}
		errs = append(errs, validateLBHostname(in.Hostname, p.Index(i).Child("hostname"))...)
	}
	return errs
}

func validateTLSSecretName(name string) []string {
	if name == "" {
		return nil
	}
	return apimachineryvalidation.NameIsDNSSubdomain(name, false)
}

func validateIngressSpec(spec *networkingv1.IngressSpec, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(fldPath, spec.Rules, fmt.Sprintf("either `%s` or `rules` must be specified", "defaultBackend")))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(spec.DefaultBackend, fldPath.Child("defaultBackend"))...)
	}
	for i := range spec.Rules {
		rule := &spec.Rules[i]
		rulePath := fldPath.Child("rules").Index(i)
		wildcard := false
		if rule.Host != "" {
			hostPath := rulePath.Child("host")
			if _, err := netip.ParseAddr(rule.Host); err == nil {
				errs = append(errs, field.Invalid(hostPath, rule.Host, "must be a DNS name, not an IP address"))
			}
			if strings.Contains(rule.Host, "*") {
				for _, msg := range validation.IsWildcardDNS1123Subdomain(rule.Host) {
					errs = append(errs, field.Invalid(hostPath, rule.Host, msg))
				}
				wildcard = true
			} else {
				errs = append(errs, validateDNS1123Subdomain(rule.Host, hostPath)...)
			}
		}
		if !wildcard || !opts.allowInvalidWildcardHostRule {
			errs = append(errs, validateIngressRuleValue(&rule.IngressRuleValue, rulePath, opts)...)
		}
	}
	for i, tls := range spec.TLS {
		tlsPath := fldPath.Child("tls").Index(i)
		for j, host := range tls.Hosts {
			hostPath := tlsPath.Child("hosts").Index(j)
			if strings.Contains(host, "*") {
				for _, msg := range validation.IsWildcardDNS1123Subdomain(host) {
					errs = append(errs, field.Invalid(hostPath, host, msg))
				}
				continue
			}
			errs = append(errs, validateDNS1123Subdomain(host, hostPath)...)
		}
		if !opts.allowInvalidSecretName {
			for _, msg := range validateTLSSecretName(tls.SecretName) {
				errs = append(errs, field.Invalid(tlsPath.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *spec.IngressClassName, fldPath.Child("ingressClassName"))...)
	}
	return errs
}

func validateIngressRuleValue(rv *networkingv1.IngressRuleValue, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	if rv.HTTP == nil {
		return nil
	}
	var errs field.ErrorList
	httpPath := fldPath.Child("http")
	if len(rv.HTTP.Paths) == 0 {
		errs = append(errs, field.Required(httpPath.Child("paths"), ""))
	}
	for i := range rv.HTTP.Paths {
		errs = append(errs, validateHTTPIngressPath(&rv.HTTP.Paths[i], httpPath.Child("paths").Index(i))...)
	}
	return errs
}

func validateHTTPIngressPath(p *networkingv1.HTTPIngressPath, fldPath *field.Path) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(fldPath.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pathPath := fldPath.Child("path")
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
		if p.Path != "" {
			for _, seq := range []string{"//", "/./", "/../", "%2f", "%2F"} {
				if strings.Contains(p.Path, seq) {
					errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("must not contain '%s'", seq)))
				}
			}
			for _, suffix := range []string{"/..", "/."} {
				if strings.HasSuffix(p.Path, suffix) {
					errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
				}
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("pathType"), *p.PathType, []networkingv1.PathType{networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix}))
	}
	return append(errs, validateIngressBackend(&p.Backend, fldPath.Child("backend"))...)
}

func validateIngressBackend(b *networkingv1.IngressBackend, fldPath *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(fldPath, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return validateTypedLocalObjectReference(b.Resource, fldPath.Child("resource"))
	case b.Service != nil:
		var errs field.ErrorList
		svcPath := fldPath.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(svcPath.Child("name"), ""))
		} else {
			errs = append(errs, validateName(validateServiceName, b.Service.Name, svcPath.Child("name"))...)
		}
		hasName, hasNumber := b.Service.Port.Name != "", b.Service.Port.Number != 0
		switch {
		case hasName && hasNumber:
			errs = append(errs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
		case hasName:
			for _, msg := range validation.IsValidPortName(b.Service.Port.Name) {
				errs = append(errs, field.Invalid(svcPath.Child("port", "name"), b.Service.Port.Name, msg))
			}
		case hasNumber:
			for _, msg := range validation.IsValidPortNum(int(b.Service.Port.Number)) {
				errs = append(errs, field.Invalid(svcPath.Child("port", "number"), b.Service.Port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(fldPath, "port name or number is required"))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(fldPath, "", "resource or service backend is required")}
	}
}

func validatePathSegmentName(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateTypedLocalObjectReference(ref *corev1.TypedLocalObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIGroup != nil {
		errs = append(errs, validateDNS1123Subdomain(*ref.APIGroup, fldPath.Child("apiGroup"))...)
	}
	errs = append(errs, validatePathSegmentName(ref.Kind, fldPath.Child("kind"))...)
	return append(errs, validatePathSegmentName(ref.Name, fldPath.Child("name"))...)
}

func validateIngressClassSpec(spec *networkingv1.IngressClassSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ctrlPath := fldPath.Child("controller")
	if spec.Controller == "" {
		errs = append(errs, field.Required(ctrlPath, ""))
	} else {
		if len(spec.Controller) > maxLenIngressClassController {
			errs = append(errs, field.TooLong(ctrlPath, "", maxLenIngressClassController))
		}
		errs = append(errs, validation.IsDomainPrefixedPath(ctrlPath, spec.Controller)...)
	}
	params := spec.Parameters
	if params == nil {
		return errs
	}
	pPath := fldPath.Child("parameters")
	if params.APIGroup != nil {
		errs = append(errs, validateDNS1123Subdomain(*params.APIGroup, pPath.Child("apiGroup"))...)
	}
	errs = append(errs, validatePathSegmentName(params.Kind, pPath.Child("kind"))...)
	errs = append(errs, validatePathSegmentName(params.Name, pPath.Child("name"))...)
	if params.Scope == nil {
		return append(errs, field.Required(pPath.Child("scope"), ""))
	}
	switch *params.Scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil {
			errs = append(errs, field.Required(pPath.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			errs = append(errs, validateName(apimachineryvalidation.ValidateNamespaceName, *params.Namespace, pPath.Child("namespace"))...)
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			errs = append(errs, field.Forbidden(pPath.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(pPath.Child("scope"), *params.Scope, []string{networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}))
	}
	return errs
}
