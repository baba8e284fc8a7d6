// Package defaults sets the upstream Kubernetes default values on the external
// (k8s.io/api) types served by the kubette API server.
//
// The defaults mirror the defaulting functions of the Kubernetes API server
// (pkg/apis/*/v1/defaults.go and the generated declarative defaults) for the
// kinds kubette serves, so that objects read back through kubectl look like
// they do on an upstream cluster. Apply must be called after decoding a
// request body and before validation.
//
// A few values upstream assigns outside of defaulting are deliberately left to
// the API server:
//
//   - Service spec.clusterIP(s), spec.ipFamilies, spec.ipFamilyPolicy, node
//     ports and spec.healthCheckNodePort are set by the upstream IP/port
//     allocators (they depend on the cluster's service CIDRs and on the previous
//     object on update), so Apply never touches them.
//   - Pod-level resources (spec.resources) defaulting from container resources
//     is not done.
//
// Namespace spec.finalizers is an exception the other way: upstream adds the
// "kubernetes" finalizer in the namespace strategy on create, and ignores
// spec changes made through updates; the finalizer only goes away through the
// finalize subresource while the namespace is being deleted. Apply therefore
// adds it to every namespace that is not being deleted (no
// metadata.deletionTimestamp), and never to one being finalized.
package defaults

import (
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Apply sets upstream defaults on obj in place (a no-op for kinds without defaults).
//
// Supported kinds: core/v1 Namespace, Pod, Node, Service, Endpoints, ConfigMap,
// Secret, ReplicationController; apps/v1 Deployment, ReplicaSet, DaemonSet, StatefulSet; batch/v1 Job, CronJob;
// autoscaling/v1 and v2 HorizontalPodAutoscaler; discovery.k8s.io/v1 EndpointSlice;
// networking.k8s.io/v1 IngressClass; core/v1 PersistentVolume and
// PersistentVolumeClaim, storage.k8s.io/v1 StorageClass and CSIDriver. Every other object (including the kinds
// that have no upstream defaults, such as ServiceAccount, Event, Ingress, Lease,
// Scale and Binding) is left untouched. A nil obj is ignored.
func Apply(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		if o != nil {
			setPod(o)
		}
	case *corev1.Namespace:
		if o != nil {
			setNamespace(o)
		}
	case *corev1.Node:
		if o != nil {
			setNode(o)
		}
	case *corev1.Service:
		if o != nil {
			setService(o)
		}
	case *corev1.Endpoints:
		if o != nil {
			setEndpoints(o)
		}
	case *corev1.ConfigMap:
		if o != nil && o.Data == nil {
			o.Data = map[string]string{}
		}
	case *corev1.Secret:
		if o != nil && o.Type == "" {
			o.Type = corev1.SecretTypeOpaque
		}
	case *corev1.ReplicationController:
		if o != nil {
			setReplicationController(o)
		}
	case *corev1.PodTemplate:
		if o != nil {
			setPodSpec(&o.Template.Spec)
		}
	case *appsv1.Deployment:
		if o != nil {
			setDeployment(o)
		}
	case *appsv1.ReplicaSet:
		if o != nil {
			setReplicaSet(o)
		}
	case *appsv1.DaemonSet:
		if o != nil {
			setDaemonSet(o)
		}
	case *appsv1.StatefulSet:
		if o != nil {
			setStatefulSet(o)
		}
	case *discoveryv1.EndpointSlice:
		if o != nil {
			setEndpointSlice(o)
		}
	case *batchv1.Job:
		if o != nil {
			setJob(o)
		}
	case *batchv1.CronJob:
		if o != nil {
			setCronJob(o)
		}
	case *corev1.PersistentVolume:
		if o != nil {
			setPersistentVolume(o)
		}
	case *corev1.PersistentVolumeClaim:
		if o != nil {
			setPersistentVolumeClaim(o)
		}
	case *storagev1.StorageClass:
		if o != nil {
			setStorageClass(o)
		}
	case *storagev1.CSIDriver:
		if o != nil {
			setCSIDriver(o)
		}
	case *autoscalingv1.HorizontalPodAutoscaler:
		if o != nil {
			setHPAV1(o)
		}
	case *autoscalingv2.HorizontalPodAutoscaler:
		if o != nil {
			setHPAV2(o)
		}
	case *networkingv1.IngressClass:
		if o != nil && o.Spec.Parameters != nil && o.Spec.Parameters.Scope == nil {
			scope := networkingv1.IngressClassParametersReferenceScopeCluster
			o.Spec.Parameters.Scope = &scope
		}
	}
}

func int32Ptr(v int32) *int32 { return &v }

func setNamespace(ns *corev1.Namespace) {
	// Upstream cannot label nameless (generateName) namespaces either; the
	// API server's namespace strategy relabels them once named.
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
	if ns.DeletionTimestamp == nil {
		hasKube := false
		for _, f := range ns.Spec.Finalizers {
			if f == corev1.FinalizerKubernetes {
				hasKube = true
				break
			}
		}
		if !hasKube {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
		}
	}
}

func setNode(node *corev1.Node) {
	roundResourceList(node.Status.Capacity)
	roundResourceList(node.Status.Allocatable)
	if node.Status.Allocatable == nil && node.Status.Capacity != nil {
		node.Status.Allocatable = make(corev1.ResourceList, len(node.Status.Capacity))
		for k, v := range node.Status.Capacity {
			node.Status.Allocatable[k] = v.DeepCopy()
		}
	}
}

// externallyAccessible reports whether the service type exposes node ports or
// a load balancer, or has external IPs (upstream's service.ExternallyAccessible).
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

func setService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if spec.SessionAffinityConfig == nil || spec.SessionAffinityConfig.ClientIP == nil || spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: int32Ptr(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			policy := corev1.ServiceInternalTrafficPolicyCluster
			spec.InternalTrafficPolicy = &policy
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			allocate := true
			spec.AllocateLoadBalancerNodePorts = &allocate
		}
		for i := range svc.Status.LoadBalancer.Ingress {
			ing := &svc.Status.LoadBalancer.Ingress[i]
			if ing.IP != "" && ing.IPMode == nil {
				mode := corev1.LoadBalancerIPModeVIP
				ing.IPMode = &mode
			}
		}
	}
}

func setEndpoints(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func setEndpointSlice(slice *discoveryv1.EndpointSlice) {
	for i := range slice.Ports {
		p := &slice.Ports[i]
		if p.Name == nil {
			name := ""
			p.Name = &name
		}
		if p.Protocol == nil {
			proto := corev1.ProtocolTCP
			p.Protocol = &proto
		}
	}
}

func setDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = int32Ptr(1)
	}
	strategy := &d.Spec.Strategy
	if strategy.Type == "" {
		strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if strategy.RollingUpdate == nil {
			strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if strategy.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromString("25%")
			strategy.RollingUpdate.MaxUnavailable = &v
		}
		if strategy.RollingUpdate.MaxSurge == nil {
			v := intstr.FromString("25%")
			strategy.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = int32Ptr(10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = int32Ptr(600)
	}
	setPodSpec(&d.Spec.Template.Spec)
}

func setReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = int32Ptr(1)
	}
	setPodSpec(&rs.Spec.Template.Spec)
}

// setReplicationController defaults a ReplicationController as upstream: from the
// template's labels an empty selector and empty labels, spec.replicas to 1, and the
// template's pod spec.
func setReplicationController(rc *corev1.ReplicationController) {
	if rc.Spec.Template != nil && rc.Spec.Template.Labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = maps.Clone(rc.Spec.Template.Labels)
		}
		if len(rc.Labels) == 0 {
			rc.Labels = maps.Clone(rc.Spec.Template.Labels)
		}
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = int32Ptr(1)
	}
	if rc.Spec.Template != nil {
		setPodSpec(&rc.Spec.Template.Spec)
	}
}

// imagePullPolicy returns the upstream default pull policy for image: Always
// when the tag is "latest" (an image with neither tag nor digest implies
// "latest"), IfNotPresent otherwise (including digest-only references and
// references that cannot be parsed).
func imagePullPolicy(image string) corev1.PullPolicy {
	if strings.TrimSpace(image) == "" {
		return corev1.PullIfNotPresent
	}
	name, digest := image, ""
	if i := strings.Index(name, "@"); i >= 0 {
		name, digest = name[:i], name[i+1:]
	}
	tag := ""
	if i := strings.LastIndex(name, ":"); i >= 0 && i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	if tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}
