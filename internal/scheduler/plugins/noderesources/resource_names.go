package noderesources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The resource-name classes below follow upstream's v1helper and are only used
// when a plugin is built or a pod is pre-processed, never per node.

// isNativeResource reports whether name is in the kubernetes.io namespace
// (explicitly or by having no domain).
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || isPrefixedNativeResource(name)
}

// isPrefixedNativeResource reports whether name has a kubernetes.io/ domain.
func isPrefixedNativeResource(name corev1.ResourceName) bool {
	return strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResourceName reports whether name is an extended resource
// (example.com/gpu): outside kubernetes.io, not a quota "requests." name, and
// valid as a qualified name once prefixed with "requests.".
func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// isScalarResourceName reports whether the scheduler accounts name as a scalar
// resource: extended, hugepages-*, kubernetes.io/* or attachable-volumes-*.
func isScalarResourceName(name corev1.ResourceName) bool {
	return isExtendedResourceName(name) || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
		isPrefixedNativeResource(name) || strings.HasPrefix(string(name), corev1.ResourceAttachableVolumesPrefix)
}
