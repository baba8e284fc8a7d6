package podfit

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The resource-name classes below follow upstream's v1helper.

// isNativeResource reports whether name is in the kubernetes.io namespace (explicitly or by
// having no domain).
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || isPrefixedNativeResource(name)
}

// isPrefixedNativeResource reports whether name has a kubernetes.io/ domain.
func isPrefixedNativeResource(name corev1.ResourceName) bool {
	return strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// IsExtendedResourceName reports whether name is an extended resource (example.com/gpu):
// outside kubernetes.io, not a quota "requests." name, and valid as a qualified name once
// prefixed with "requests.".
func IsExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// IsScalarResourceName reports whether the resource fit accounts name as a scalar resource:
// extended, hugepages-*, kubernetes.io/* or attachable-volumes-*.
func IsScalarResourceName(name corev1.ResourceName) bool {
	return IsExtendedResourceName(name) || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
		isPrefixedNativeResource(name) || strings.HasPrefix(string(name), corev1.ResourceAttachableVolumesPrefix)
}
