package registry

import (
	"fmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// NewScheme returns a scheme holding every API type the server serves, plus the
// meta.k8s.io types (Status, Table, WatchEvent, options). Each server builds its own.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	adders := []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, authenticationv1.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme, batchv1.AddToScheme, certificatesv1.AddToScheme,
		coordinationv1.AddToScheme, discoveryv1.AddToScheme, eventsv1.AddToScheme,
		networkingv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme, authorizationv1.AddToScheme, schedulingv1.AddToScheme,
		flowcontrolv1.AddToScheme, apiextensionsv1.AddToScheme, admissionregistrationv1.AddToScheme, nodev1.AddToScheme,
		apiregistrationv1.AddToScheme, storagev1.AddToScheme, metricsv1beta1.AddToScheme,
	}
	for _, add := range adders {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	// policy/v1beta1 only for the Eviction bodies pods/eviction still accepts.
	s.AddKnownTypes(policyv1beta1.SchemeGroupVersion, &policyv1beta1.Eviction{})
	metav1.AddToGroupVersion(s, policyv1beta1.SchemeGroupVersion)
	metav1.AddToGroupVersion(s, schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"})
	s.AddKnownTypes(schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"},
		&metav1.Table{}, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{})
	return s, nil
}
