// Package validation implements the upstream Kubernetes validation rules for
// the external (k8s.io/api) types served by the kubette API server.
//
// The rules, error types, messages and field paths follow the upstream API
// server (pkg/apis/*/validation and the registry strategies), because kubectl
// prints them verbatim, e.g.
//
//	The Deployment "web" is invalid: spec.selector: Invalid value: ...: field is immutable
//
// Objects are expected to have been defaulted (see package defaults) before
// they are validated, exactly as upstream validates defaulted objects: a
// missing value that upstream always defaults (a pod's restartPolicy, a
// service port's protocol, ...) is reported as Required.
//
// Namespaced kinds: a missing metadata.namespace is not reported (the caller
// checks namespace presence); a non-empty namespace must be a valid namespace
// name. Cluster-scoped kinds must not carry a namespace.
//
// Updates: an obj without metadata.resourceVersion is validated as an
// unconditional update of old (upstream fills the stored resourceVersion in
// before validating). The caller is expected to carry allocated values (a
// Service's clusterIP(s), node ports and healthCheckNodePort) over from old
// when the request omits them, as upstream's service registry does before
// validation; likewise a LoadBalancer Service with externalTrafficPolicy Local
// needs its healthCheckNodePort allocated before validation.
//
// Kinds covered: core/v1 Namespace, Pod, Node, Service, Endpoints, ConfigMap,
// Secret, ServiceAccount, Event, Binding and ReplicationController; apps/v1 Deployment, ReplicaSet, DaemonSet, StatefulSet and ControllerRevision; batch/v1 Job and CronJob;
// autoscaling/v1 Scale; discovery.k8s.io/v1 EndpointSlice;
// networking.k8s.io/v1 Ingress and IngressClass; coordination.k8s.io/v1
// Lease; events.k8s.io/v1 Event. Other objects are accepted without errors.
package validation

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	fieldImmutableErrorMsg = apimachineryvalidation.FieldImmutableErrorMsg
	isNegativeErrorMsg     = apimachineryvalidation.IsNegativeErrorMsg
	isNotPositiveErrorMsg  = `must be greater than zero`
	isNotIntegerErrorMsg   = `must be an integer`
)

// ValidateCreate returns the field errors of a new object (metadata included: name rules per kind, namespace presence for namespaced kinds is checked by the caller).
func ValidateCreate(obj runtime.Object) field.ErrorList {
	if isNilObject(obj) {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("nil object"))}
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		return validateNamespace(o)
	case *corev1.Pod:
		return validatePodCreate(o)
	case *corev1.Node:
		return validateNode(o)
	case *corev1.Service:
		return validateServiceCreate(o)
	case *corev1.Endpoints:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validateEndpointsSpec(o, nil)...)
	case *corev1.ConfigMap:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validateConfigMapData(o)...)
	case *corev1.Secret:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validateSecretData(o)...)
	case *corev1.ServiceAccount:
		return validateMeta(&o.ObjectMeta, true, apimachineryvalidation.ValidateServiceAccountName)
	case *corev1.Event:
		return validateCoreEventCreate(o)
	case *corev1.Binding:
		return validateBinding(o)
	case *corev1.ReplicationController:
		return validateReplicationController(o)
	case *corev1.PodTemplate:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validatePodTemplateSpec(&o.Template, field.NewPath("template"))...)
	case *appsv1.Deployment:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validateDeploymentSpec(&o.Spec, field.NewPath("spec"))...)
	case *appsv1.ReplicaSet:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validateReplicaSetSpec(&o.Spec, field.NewPath("spec"))...)
	case *appsv1.ControllerRevision:
		return validateControllerRevisionCreate(o)
	case *appsv1.DaemonSet:
		return validateDaemonSet(o)
	case *appsv1.StatefulSet:
		return validateStatefulSet(o)
	case *autoscalingv1.Scale:
		return validateScale(o)
	case *batchv1.Job:
		return validateJob(o)
	case *batchv1.CronJob:
		return validateCronJob(o)
	case *discoveryv1.EndpointSlice:
		return append(validateMeta(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain), validateEndpointSliceSpec(o, nil)...)
	case *networkingv1.Ingress:
		return validateIngressCreate(o)
	case *networkingv1.IngressClass:
		return append(validateMeta(&o.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain), validateIngressClassSpec(&o.Spec, field.NewPath("spec"))...)
	case *coordinationv1.Lease:
		return append(validateMetaWith(&o.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, false), validateLeaseSpec(&o.Spec, field.NewPath("spec"))...)
	case *eventsv1.Event:
		return validateEventsV1Create(o)
	}
	return nil
}

// ValidateUpdate returns the field errors of an update of old to obj, including immutable fields.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := checkPair(obj, old); errs != nil {
		return errs
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		prev := old.(*corev1.Namespace)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), validateNamespaceFinalizers(o)...)
	case *corev1.Pod:
		return validatePodUpdate(o, old.(*corev1.Pod))
	case *corev1.Node:
		return validateNodeUpdate(o, old.(*corev1.Node))
	case *corev1.Service:
		return validateServiceUpdate(o, old.(*corev1.Service))
	case *corev1.Endpoints:
		prev := old.(*corev1.Endpoints)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), validateEndpointsSpec(o, prev)...)
	case *corev1.ConfigMap:
		return validateConfigMapUpdate(o, old.(*corev1.ConfigMap))
	case *corev1.Secret:
		return validateSecretUpdate(o, old.(*corev1.Secret))
	case *corev1.ServiceAccount:
		prev := old.(*corev1.ServiceAccount)
		return validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
	case *corev1.Event:
		return validateCoreEventUpdate(o, old.(*corev1.Event))
	case *corev1.Binding:
		return validateBinding(o)
	case *corev1.ReplicationController:
		return validateReplicationControllerUpdate(o, old.(*corev1.ReplicationController))
	case *corev1.PodTemplate:
		prev := old.(*corev1.PodTemplate)
		return append(validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta), validatePodTemplateSpec(&o.Template, field.NewPath("template"))...)
	case *appsv1.Deployment:
		return validateDeploymentUpdate(o, old.(*appsv1.Deployment))
	case *appsv1.ReplicaSet:
		return validateReplicaSetUpdate(o, old.(*appsv1.ReplicaSet))
	case *appsv1.ControllerRevision:
		return validateControllerRevisionUpdate(o, old.(*appsv1.ControllerRevision))
	case *appsv1.DaemonSet:
		return validateDaemonSetUpdate(o, old.(*appsv1.DaemonSet))
	case *appsv1.StatefulSet:
		return validateStatefulSetUpdate(o, old.(*appsv1.StatefulSet))
	case *autoscalingv1.Scale:
		return validateScale(o)
	case *batchv1.Job:
		return validateJobUpdate(o, old.(*batchv1.Job))
	case *batchv1.CronJob:
		return validateCronJobUpdate(o, old.(*batchv1.CronJob))
	case *discoveryv1.EndpointSlice:
		prev := old.(*discoveryv1.EndpointSlice)
		errs := validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
		errs = append(errs, validateEndpointSliceSpec(o, prev)...)
		return append(errs, validateImmutable(o.AddressType, prev.AddressType, field.NewPath("addressType"))...)
	case *networkingv1.Ingress:
		return validateIngressUpdate(o, old.(*networkingv1.Ingress))
	case *networkingv1.IngressClass:
		prev := old.(*networkingv1.IngressClass)
		errs := validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
		errs = append(errs, validateImmutable(o.Spec.Controller, prev.Spec.Controller, field.NewPath("spec", "controller"))...)
		return append(errs, validateIngressClassSpec(&o.Spec, field.NewPath("spec"))...)
	case *coordinationv1.Lease:
		prev := old.(*coordinationv1.Lease)
		return append(validateMetaUpdateWith(&o.ObjectMeta, &prev.ObjectMeta, false), validateLeaseSpec(&o.Spec, field.NewPath("spec"))...)
	case *eventsv1.Event:
		return validateEventsV1Update(o, old.(*eventsv1.Event))
	}
	return nil
}

// ValidateStatusUpdate validates an update through the status subresource.
//
// Kinds with a status subresource (Namespace, Pod, Node, Service,
// ReplicationController, Deployment, ReplicaSet, DaemonSet, StatefulSet, Ingress) get upstream's status rules; for the other kinds this
// is the same as ValidateUpdate.
func ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := checkPair(obj, old); errs != nil {
		return errs
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		return validateNamespaceStatusUpdate(o, old.(*corev1.Namespace))
	case *corev1.Pod:
		return validatePodStatusUpdate(o, old.(*corev1.Pod))
	case *corev1.Node:
		return validateNodeUpdate(o, old.(*corev1.Node))
	case *corev1.Service:
		return validateServiceStatusUpdate(o, old.(*corev1.Service))
	case *corev1.ReplicationController:
		return validateReplicationControllerStatusUpdate(o, old.(*corev1.ReplicationController))
	case *appsv1.Deployment:
		return validateDeploymentStatusUpdate(o, old.(*appsv1.Deployment))
	case *appsv1.ReplicaSet:
		return validateReplicaSetStatusUpdate(o, old.(*appsv1.ReplicaSet))
	case *appsv1.DaemonSet:
		return validateDaemonSetStatusUpdate(o, old.(*appsv1.DaemonSet))
	case *appsv1.StatefulSet:
		return validateStatefulSetStatusUpdate(o, old.(*appsv1.StatefulSet))
	case *batchv1.Job:
		return validateJobStatusUpdate(o, old.(*batchv1.Job))
	case *batchv1.CronJob:
		prev := old.(*batchv1.CronJob)
		return validateMetaUpdate(&o.ObjectMeta, &prev.ObjectMeta)
	case *networkingv1.Ingress:
		return validateIngressStatusUpdate(o, old.(*networkingv1.Ingress))
	}
	return ValidateUpdate(obj, old)
}

func isNilObject(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// checkPair rejects nil objects and objects of different types.
func checkPair(obj, old runtime.Object) field.ErrorList {
	if isNilObject(obj) || isNilObject(old) {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("nil object"))}
	}
	if reflect.TypeOf(obj) != reflect.TypeOf(old) {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("cannot validate an update of %T to %T", old, obj))}
	}
	return nil
}

// validateMeta validates the metadata of a new object, with the additional
// finalizer name rules of the upstream core API group.
func validateMeta(meta *metav1.ObjectMeta, namespaced bool, nameFn apimachineryvalidation.ValidateNameFunc) field.ErrorList {
	return validateMetaWith(meta, namespaced, nameFn, true)
}

func validateMetaWith(meta *metav1.ObjectMeta, namespaced bool, nameFn apimachineryvalidation.ValidateNameFunc, kubeFinalizers bool) field.ErrorList {
	fldPath := field.NewPath("metadata")
	// The caller checks namespace presence; only a given namespace is validated.
	requiresNamespace := namespaced && meta.Namespace != ""
	errs := apimachineryvalidation.ValidateObjectMeta(meta, requiresNamespace, nameFn, fldPath)
	if kubeFinalizers {
		errs = append(errs, validateKubeFinalizerNames(meta.Finalizers, fldPath.Child("finalizers"))...)
	}
	return errs
}

// validateMetaUpdate validates the metadata of an updated object.
func validateMetaUpdate(newMeta, oldMeta *metav1.ObjectMeta) field.ErrorList {
	return validateMetaUpdateWith(newMeta, oldMeta, true)
}

func validateMetaUpdateWith(newMeta, oldMeta *metav1.ObjectMeta, kubeFinalizers bool) field.ErrorList {
	fldPath := field.NewPath("metadata")
	if newMeta.ResourceVersion == "" {
		// An unconditional update: the API server writes over the stored
		// revision, as upstream does after filling resourceVersion in.
		m := *newMeta
		m.ResourceVersion = oldMeta.ResourceVersion
		newMeta = &m
	}
	errs := apimachineryvalidation.ValidateObjectMetaUpdate(newMeta, oldMeta, fldPath)
	errs = append(errs, apimachineryvalidation.ValidateFinalizers(newMeta.Finalizers, fldPath.Child("finalizers"))...)
	if kubeFinalizers {
		errs = append(errs, validateKubeFinalizerNames(newMeta.Finalizers, fldPath.Child("finalizers"))...)
	}
	return errs
}

// isStandardFinalizer reports whether name is a finalizer that needs no domain prefix.
func isStandardFinalizer(name string) bool {
	switch name {
	case string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		return true
	}
	return false
}

func validateKubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	if !strings.Contains(name, "/") && !isStandardFinalizer(name) {
		return field.ErrorList{field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

func validateKubeFinalizerNames(finalizers []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, validateKubeFinalizerName(f, fldPath.Index(i))...)
	}
	return errs
}

func validateImmutable(newVal, oldVal interface{}, fldPath *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateImmutableField(newVal, oldVal, fldPath)
}

func validateNonnegative(value int64, fldPath *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateNonnegativeField(value, fldPath)
}

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateDNS1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// validateName checks value against a name function (used for references to
// other objects by name).
func validateName(nameFn apimachineryvalidation.ValidateNameFunc, value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range nameFn(value, false) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// validateOptionalEnum reports NotSupported at fldPath when the optional value v
// is set to anything but one of allowed, which the message lists in the given
// order. An unset value is not an error.
func validateOptionalEnum[T ~string](v *T, fldPath *field.Path, allowed ...T) field.ErrorList {
	if v == nil || slices.Contains(allowed, *v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, *v, allowed)}
}
