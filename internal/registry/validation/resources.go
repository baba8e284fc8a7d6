package validation

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	hugePagesPrefix         = "hugepages-"
	requestsHugePagesPrefix = "requests.hugepages-"
)

// isIntegerResource reports whether the (unqualified) resource must be a whole number.
func isIntegerResource(name string) bool {
	switch name {
	case "pods", "services", "replicationcontrollers", "resourcequotas", "services.nodeports",
		"services.loadbalancers", "secrets", "configmaps", "persistentvolumeclaims":
		return true
	}
	return false
}

func isHugePageResourceName(name string) bool { return strings.HasPrefix(name, hugePagesPrefix) }

// isStandardResourceName reports whether name is an unqualified resource name upstream knows.
func isStandardResourceName(name string) bool {
	switch name {
	case "cpu", "memory", "ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage",
		"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"storage", "requests.storage":
		return true
	}
	return isIntegerResource(name) || isHugePageResourceName(name) || strings.HasPrefix(name, requestsHugePagesPrefix)
}

// isStandardContainerResourceName reports whether a container may request the unqualified resource.
func isStandardContainerResourceName(name string) bool {
	switch name {
	case "cpu", "memory", "ephemeral-storage":
		return true
	}
	return isHugePageResourceName(name)
}

// isNativeResource reports whether name is unqualified or in the kubernetes.io domain.
func isNativeResource(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
}

// isExtendedResourceName reports whether name is a domain-qualified extended
// resource (e.g. example.com/gpu).
func isExtendedResourceName(name string) bool {
	if isNativeResource(name) || strings.HasPrefix(name, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName("requests."+name)) == 0
}

// isOvercommitAllowed reports whether requests may be lower than limits.
func isOvercommitAllowed(name string) bool {
	return isNativeResource(name) && !isHugePageResourceName(name)
}

func isIntegerResourceName(name string) bool {
	return isIntegerResource(name) || isExtendedResourceName(name)
}

// validateResourceName validates a compute resource name.
func validateResourceName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if len(errs) != 0 {
		return errs
	}
	if !strings.Contains(name, "/") && !isStandardResourceName(name) {
		errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource type or fully qualified"))
	}
	return errs
}

// validateContainerResourceName validates a resource name in a container's
// resource requirements.
func validateContainerResourceName(name string, fldPath *field.Path) field.ErrorList {
	errs := validateResourceName(name, fldPath)
	if !strings.Contains(name, "/") {
		if !isStandardContainerResourceName(name) {
			return append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && !isExtendedResourceName(name) {
		return append(errs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// validateResourceQuantityValue checks that a quantity is not negative and,
// for integer resources, whole.
func validateResourceQuantityValue(name string, value resource.Quantity, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if value.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(fldPath, value.String(), isNegativeErrorMsg))
	}
	if isIntegerResourceName(name) && value.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(fldPath, value, isNotIntegerErrorMsg))
	}
	return errs
}

// hugePageSizeDivides reports whether quantity is a whole multiple of the page
// size encoded in a hugepages-<size> resource name.
func hugePageSizeDivides(name string, quantity resource.Quantity) bool {
	size, err := resource.ParseQuantity(strings.TrimPrefix(name, hugePagesPrefix))
	if err != nil || size.Value() <= 0 {
		return false
	}
	return quantity.Value()%size.Value() == 0
}

// validateContainerResources validates a container's resource requirements:
// names, quantities, requests <= limits and the non-overcommitable rules.
func validateContainerResources(req *corev1.ResourceRequirements, podClaims map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath := fldPath.Child("limits")
	reqPath := fldPath.Child("requests")
	limCPUOrMemory, reqCPUOrMemory := false, false
	limHugePages, reqHugePages := false, false
	for _, name := range sortedResourceNames(req.Limits) {
		quantity := req.Limits[name]
		path := limPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(string(name), path)...)
		errs = append(errs, validateResourceQuantityValue(string(name), quantity, path)...)
		if isHugePageResourceName(string(name)) {
			limHugePages = true
			if !hugePageSizeDivides(string(name), quantity) {
				errs = append(errs, field.Invalid(path, quantity.String(), fmt.Sprintf("%s is not positive integer multiple of %s", quantity.String(), name)))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			limCPUOrMemory = true
		}
	}
	for _, name := range sortedResourceNames(req.Requests) {
		quantity := req.Requests[name]
		path := reqPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(string(name), path)...)
		errs = append(errs, validateResourceQuantityValue(string(name), quantity, path)...)
		if limit, ok := req.Limits[name]; ok {
			if quantity.Cmp(limit) != 0 && !isOvercommitAllowed(string(name)) {
				errs = append(errs, field.Invalid(reqPath, quantity.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if quantity.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(reqPath, quantity.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !isOvercommitAllowed(string(name)) {
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePageResourceName(string(name)) {
			reqHugePages = true
			if !hugePageSizeDivides(string(name), quantity) {
				errs = append(errs, field.Invalid(path, quantity.String(), fmt.Sprintf("%s is not positive integer multiple of %s", quantity.String(), name)))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			reqCPUOrMemory = true
		}
	}
	if !limCPUOrMemory && !reqCPUOrMemory && (reqHugePages || limHugePages) {
		errs = append(errs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	errs = append(errs, validateResourceClaimRefs(req.Claims, podClaims, fldPath.Child("claims"))...)
	return errs
}

// validateResourceClaimRefs checks that container claims reference entries of
// spec.resourceClaims.
func validateResourceClaimRefs(claims []corev1.ResourceClaim, podClaims map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, claim := range claims {
		if claim.Name == "" {
			errs = append(errs, field.Required(fldPath.Index(i), ""))
			continue
		}
		key := claim.Name
		if claim.Request != "" {
			errs = append(errs, validateDNS1123Label(claim.Request, fldPath.Index(i).Child("request"))...)
			key += "/" + claim.Request
		}
		if seen[key] || seen[claim.Name] {
			errs = append(errs, field.Duplicate(fldPath.Index(i), key))
		}
		seen[key] = true
		if !podClaims[claim.Name] {
			e := field.NotFound(fldPath.Index(i), claim.Name)
			e.Detail = "must be one of the names in pod.spec.resourceClaims"
			errs = append(errs, e)
		}
	}
	return errs
}

// sortedResourceNames returns the keys of list in a stable order so that
// error lists are deterministic.
func sortedResourceNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
