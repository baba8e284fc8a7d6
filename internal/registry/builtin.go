package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	coreV1           = schema.GroupVersion{Version: "v1"}
	appsV1           = schema.GroupVersion{Group: "apps", Version: "v1"}
	discoveryV1      = schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}
	networkingV1     = schema.GroupVersion{Group: "networking.k8s.io", Version: "v1"}
	coordinationV1   = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	eventsV1         = schema.GroupVersion{Group: "events.k8s.io", Version: "v1"}
	authenticationV1 = schema.GroupVersion{Group: "authentication.k8s.io", Version: "v1"}
)

// Builtin returns the resources kubette serves, in discovery order. Each call
// builds fresh values; nothing here is shared mutable state.
func Builtin() []*Resource {
	res := []*Resource{
		{
			GroupVersion: coreV1, Kind: "Namespace", ListKind: "NamespaceList", Plural: "namespaces", Singular: "namespace",
			ShortNames: []string{"ns"}, StoragePrefix: "/registry/namespaces", Subresources: []string{"status", "finalize"},
			ReturnDeletedObject: true,
			Strategy:            namespaceStrategy(),
			New:                 func() runtime.Object { return &corev1.Namespace{} }, NewList: func() runtime.Object { return &corev1.NamespaceList{} },
			Fields: func(obj runtime.Object) fields.Set {
				ns, _ := obj.(*corev1.Namespace)
				if ns == nil {
					ns = &corev1.Namespace{}
				}
				return fields.Set{"status.phase": string(ns.Status.Phase)}
			},
		},
		{
			GroupVersion: coreV1, Kind: "Pod", ListKind: "PodList", Plural: "pods", Singular: "pod", Namespaced: true,
			ShortNames: []string{"po"}, Categories: []string{"all"}, StoragePrefix: "/registry/pods",
			Subresources:        []string{"status", "binding", "eviction", "log", "ephemeralcontainers", "exec", "attach", "portforward", "proxy"},
			ReturnDeletedObject: true,
			Strategy:            podStrategy(),
			New:                 func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} },
			Fields: podFields,
		},
		{
			GroupVersion: coreV1, Kind: "Node", ListKind: "NodeList", Plural: "nodes", Singular: "node",
			ShortNames: []string{"no"}, StoragePrefix: "/registry/minions", Subresources: []string{"status", "proxy"},
			Strategy: typed(Strategy{PrepareForCreate: keepStatus}),
			New:      func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} },
			Fields: func(obj runtime.Object) fields.Set {
				n, _ := obj.(*corev1.Node)
				if n == nil {
					n = &corev1.Node{}
				}
				return fields.Set{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
			},
		},
		{
			GroupVersion: coreV1, Kind: "Service", ListKind: "ServiceList", Plural: "services", Singular: "service", Namespaced: true,
			ShortNames: []string{"svc"}, Categories: []string{"all"}, StoragePrefix: "/registry/services/specs", Subresources: []string{"status", "proxy"},
			ReturnDeletedObject: true,
			Strategy:            serviceStrategy(),
			New:                 func() runtime.Object { return &corev1.Service{} }, NewList: func() runtime.Object { return &corev1.ServiceList{} },
			Fields: func(obj runtime.Object) fields.Set {
				s, _ := obj.(*corev1.Service)
				if s == nil {
					s = &corev1.Service{}
				}
				return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
			},
		},
		{
			GroupVersion: coreV1, Kind: "Endpoints", ListKind: "EndpointsList", Plural: "endpoints", Singular: "endpoints", Namespaced: true,
			ShortNames: []string{"ep"}, StoragePrefix: "/registry/services/endpoints", AllowCreateOnUpdate: true,
			New: func() runtime.Object { return &corev1.Endpoints{} }, NewList: func() runtime.Object { return &corev1.EndpointsList{} },
		},
		{
			GroupVersion: coreV1, Kind: "ConfigMap", ListKind: "ConfigMapList", Plural: "configmaps", Singular: "configmap", Namespaced: true,
			ShortNames: []string{"cm"}, StoragePrefix: "/registry/configmaps",
			New: func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} },
		},
		{
			GroupVersion: coreV1, Kind: "Secret", ListKind: "SecretList", Plural: "secrets", Singular: "secret", Namespaced: true,
			StoragePrefix: "/registry/secrets",
			New:           func() runtime.Object { return &corev1.Secret{} }, NewList: func() runtime.Object { return &corev1.SecretList{} },
			Fields: func(obj runtime.Object) fields.Set {
				s, _ := obj.(*corev1.Secret)
				if s == nil {
					s = &corev1.Secret{}
				}
				return fields.Set{"type": string(s.Type)}
			},
		},
		{
			GroupVersion: coreV1, Kind: "ServiceAccount", ListKind: "ServiceAccountList", Plural: "serviceaccounts", Singular: "serviceaccount", Namespaced: true,
			ShortNames: []string{"sa"}, StoragePrefix: "/registry/serviceaccounts", Subresources: []string{"token"},
			ReturnDeletedObject: true,
			New:                 func() runtime.Object { return &corev1.ServiceAccount{} }, NewList: func() runtime.Object { return &corev1.ServiceAccountList{} },
		},
		{
			GroupVersion: coreV1, Kind: "PodTemplate", ListKind: "PodTemplateList", Plural: "podtemplates", Singular: "podtemplate", Namespaced: true,
			StoragePrefix: "/registry/podtemplates",
			New:           func() runtime.Object { return &corev1.PodTemplate{} }, NewList: func() runtime.Object { return &corev1.PodTemplateList{} },
		},
		{
			GroupVersion: coreV1, Kind: "Event", ListKind: "EventList", Plural: "events", Singular: "event", Namespaced: true,
			ShortNames: []string{"ev"}, StoragePrefix: "/registry/events", AllowCreateOnUpdate: true, ExpiresWithEventTTL: true,
			NoWatchCache: true,
			New:          func() runtime.Object { return &corev1.Event{} }, NewList: func() runtime.Object { return &corev1.EventList{} },
			Fields: eventFields,
		},
		{
			GroupVersion: coreV1, Kind: "ReplicationController", ListKind: "ReplicationControllerList", Plural: "replicationcontrollers", Singular: "replicationcontroller", Namespaced: true,
			ShortNames: []string{"rc"}, Categories: []string{"all"}, StoragePrefix: "/registry/controllers", Subresources: []string{"status", "scale"},
			// Deleting through core/v1 orphans the pods unless the request says otherwise,
			// as upstream keeps for backward compatibility.
			Strategy: typed(Strategy{Scale: replicationControllerScale(), DefaultGarbageCollectionPolicy: metav1.DeletePropagationOrphan}),
			New:      func() runtime.Object { return &corev1.ReplicationController{} }, NewList: func() runtime.Object { return &corev1.ReplicationControllerList{} },
			Fields: func(obj runtime.Object) fields.Set {
				rc, _ := obj.(*corev1.ReplicationController)
				if rc == nil {
					rc = &corev1.ReplicationController{}
				}
				return fields.Set{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
			},
		},
		{
			GroupVersion: appsV1, Kind: "Deployment", ListKind: "DeploymentList", Plural: "deployments", Singular: "deployment", Namespaced: true,
			ShortNames: []string{"deploy"}, Categories: []string{"all"}, StoragePrefix: "/registry/deployments", Subresources: []string{"status", "scale"},
			Strategy: typed(Strategy{Scale: deploymentScale()}),
			New:      func() runtime.Object { return &appsv1.Deployment{} }, NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
		},
		{
			GroupVersion: appsV1, Kind: "ReplicaSet", ListKind: "ReplicaSetList", Plural: "replicasets", Singular: "replicaset", Namespaced: true,
			ShortNames: []string{"rs"}, Categories: []string{"all"}, StoragePrefix: "/registry/replicasets", Subresources: []string{"status", "scale"},
			Strategy: typed(Strategy{Scale: replicaSetScale()}),
			New:      func() runtime.Object { return &appsv1.ReplicaSet{} }, NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
			Fields: func(obj runtime.Object) fields.Set {
				rs, _ := obj.(*appsv1.ReplicaSet)
				if rs == nil {
					rs = &appsv1.ReplicaSet{}
				}
				return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
			},
		},
		{
			GroupVersion: discoveryV1, Kind: "EndpointSlice", ListKind: "EndpointSliceList", Plural: "endpointslices", Singular: "endpointslice", Namespaced: true,
			StoragePrefix: "/registry/endpointslices",
			New:           func() runtime.Object { return &discoveryv1.EndpointSlice{} }, NewList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		},
		{
			GroupVersion: networkingV1, Kind: "Ingress", ListKind: "IngressList", Plural: "ingresses", Singular: "ingress", Namespaced: true,
			ShortNames: []string{"ing"}, StoragePrefix: "/registry/ingress", Subresources: []string{"status"},
			New: func() runtime.Object { return &networkingv1.Ingress{} }, NewList: func() runtime.Object { return &networkingv1.IngressList{} },
		},
		{
			GroupVersion: networkingV1, Kind: "IngressClass", ListKind: "IngressClassList", Plural: "ingressclasses", Singular: "ingressclass",
			StoragePrefix: "/registry/ingressclasses",
			New:           func() runtime.Object { return &networkingv1.IngressClass{} }, NewList: func() runtime.Object { return &networkingv1.IngressClassList{} },
		},
		{
			GroupVersion: coordinationV1, Kind: "Lease", ListKind: "LeaseList", Plural: "leases", Singular: "lease", Namespaced: true,
			StoragePrefix: "/registry/leases",
			New:           func() runtime.Object { return &coordinationv1.Lease{} }, NewList: func() runtime.Object { return &coordinationv1.LeaseList{} },
		},
		{
			GroupVersion: eventsV1, Kind: "Event", ListKind: "EventList", Plural: "events", Singular: "event", Namespaced: true,
			ShortNames: []string{"ev"}, StoragePrefix: "/registry/events", StorageVersion: coreV1, AllowCreateOnUpdate: true,
			ExpiresWithEventTTL: true, NoWatchCache: true, ToServed: eventToServed, ToStorage: eventToStorage,
			New: func() runtime.Object { return &eventsv1.Event{} }, NewList: func() runtime.Object { return &eventsv1.EventList{} },
			Fields: eventFields,
		},
		{
			GroupVersion: authenticationV1, Kind: "SelfSubjectReview", Plural: "selfsubjectreviews", Singular: "selfsubjectreview",
			Verbs: []string{"create"}, Virtual: true,
			New: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
		},
	}
	res = append(res, appsResources()...)
	res = append(res, batchResources()...)
	res = append(res, storageResources()...)
	res = append(res, quotaResources()...)
	res = append(res, certificatesResources()...)
	res = append(res, authenticationResources()...)
	res = append(res, authorizationResources()...)
	res = append(res, rbacResources()...)
	res = append(res, flowcontrolResources()...)
	res = append(res, apiextensionsResources()...)
	res = append(res, apiregistrationResources()...)
	res = append(res, webhookConfigurationResources()...)
	res = append(res, admissionPolicyResources()...)
	res = append(res, policyResources()...)
	res = append(res, autoscalingResources()...)
	res = append(res, nodeResources()...)
	// Last, as metrics-server's APIService has the lowest group priority (100).
	res = append(res, metricsResources()...)
	for _, r := range res {
		if r.StorageVersion.Empty() {
			r.StorageVersion = r.GroupVersion
		}
		// Every built-in kind is a k8s.io/api type with upstream's defaults and validation.
		r.Strategy = typed(r.Strategy)
	}
	return res
}

func podFields(obj runtime.Object) fields.Set {
	p, _ := obj.(*corev1.Pod)
	if p == nil {
		p = &corev1.Pod{}
	}
	set := make(fields.Set, 10) // room for SelectableFields' metadata.name and metadata.namespace
	set["spec.nodeName"] = p.Spec.NodeName
	set["spec.restartPolicy"] = string(p.Spec.RestartPolicy)
	set["spec.schedulerName"] = p.Spec.SchedulerName
	set["spec.serviceAccountName"] = p.Spec.ServiceAccountName
	set["spec.hostNetwork"] = strconv.FormatBool(p.Spec.HostNetwork)
	set["status.phase"] = string(p.Status.Phase)
	set["status.podIP"] = p.Status.PodIP
	set["status.nominatedNodeName"] = p.Status.NominatedNodeName
	return set
}

// eventFields works on the stored core/v1 Event for both event API groups, as upstream.
func eventFields(obj runtime.Object) fields.Set {
	e, _ := obj.(*corev1.Event)
	if e == nil {
		e = &corev1.Event{}
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}
