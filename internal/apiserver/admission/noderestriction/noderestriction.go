// Package noderestriction is the NodeRestriction admission plugin, as upstream's
// plugin/pkg/admission/noderestriction: it narrows what the Node authorizer lets a
// kubelet (system:node:NAME in system:nodes) write to what concerns its own node. A node
// may create and update only its own Node, without setting its config source, changing
// its taints or owner references, or setting labels in kubernetes.io and k8s.io other
// than the kubelet's own (hostname, topology, instance type, os, arch, and the
// kubelet.kubernetes.io and node.kubernetes.io prefixes) or any node-restriction.kubernetes.io
// label; create only mirror pods bound to itself that refer to no Secret, ConfigMap,
// ServiceAccount or claim; delete, evict and update the status of only the pods bound
// to itself; update only PVC status; use only its own Lease and CSINode; and request
// ServiceAccount tokens only bound to a pod of its own.
package noderestriction

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/authorizer/node"
)

// Name is the plugin's name in upstream's --enable-admission-plugins.
const Name = "NodeRestriction"

// mirrorPodAnnotation marks a pod the kubelet created from a static pod file.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Plugin is the NodeRestriction admission plugin.
type Plugin struct {
	cluster node.Cluster
}

// New returns the plugin, reading pods from the cluster (for deletes, evictions and
// token requests).
func New(c node.Cluster) *Plugin { return &Plugin{cluster: c} }

var (
	podsGR     = schema.GroupResource{Resource: "pods"}
	nodesGR    = schema.GroupResource{Resource: "nodes"}
	pvcsGR     = schema.GroupResource{Resource: "persistentvolumeclaims"}
	sasGR      = schema.GroupResource{Resource: "serviceaccounts"}
	leasesGR   = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodesGR = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
)

// Admit refuses a kubelet's write that is not about its own node.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	nodeName, isNode := node.NodeIdentity(a.User)
	if !isNode {
		return nil
	}
	if nodeName == "" {
		return forbidden(a, fmt.Errorf("could not determine node from user %q", a.User.Name))
	}
	switch a.Resource.GroupResource() {
	case podsGR:
		switch a.Subresource {
		case "":
			return p.admitPod(ctx, nodeName, a)
		case "status":
			return admitPodStatus(nodeName, a)
		case "eviction":
			return p.admitEviction(ctx, nodeName, a)
		default:
			return forbidden(a, fmt.Errorf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource))
		}
	case nodesGR:
		return admitNode(nodeName, a)
	case pvcsGR:
		if a.Subresource != "status" {
			return forbidden(a, errors.New("may only update PVC status"))
		}
		return admitPVCStatus(nodeName, a)
	case sasGR:
		return p.admitToken(ctx, nodeName, a)
	case leasesGR:
		if a.Namespace != corev1.NamespaceNodeLease {
			return forbidden(a, fmt.Errorf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
		}
		if a.Name != nodeName {
			return forbidden(a, errors.New("can only access node lease with the same name as the requesting node"))
		}
	case csiNodesGR:
		if a.Name != nodeName {
			return forbidden(a, errors.New("can only access CSINode with the same name as the requesting node"))
		}
	}
	return nil
}

// forbidden is upstream's admission refusal: 403 naming the object and the reason.
func forbidden(a *admission.Attributes, err error) error { return admission.NewForbidden(a, err) }

func (p *Plugin) admitPod(ctx context.Context, nodeName string, a *admission.Attributes) error {
	switch a.Operation {
	case admission.Create:
		return admitMirrorPod(nodeName, a)
	case admission.Delete:
		pod, ok := a.OldObject.(*corev1.Pod)
		if !ok {
			o, err := p.cluster.Get(ctx, podsGR, a.Namespace, a.Name)
			if err != nil {
				return err
			}
			if pod, ok = o.(*corev1.Pod); !ok {
				return forbidden(a, fmt.Errorf("unexpected type %T", o))
			}
		}
		if pod.Spec.NodeName != nodeName {
			return forbidden(a, fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself", nodeName))
		}
		return nil
	default:
		return forbidden(a, fmt.Errorf("unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, nodeName))
	}
}

func admitMirrorPod(nodeName string, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	if _, ok := pod.Annotations[mirrorPodAnnotation]; !ok {
		return forbidden(a, fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", mirrorPodAnnotation, nodeName))
	}
	if pod.Spec.NodeName != nodeName {
		return forbidden(a, fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", nodeName))
	}
	if n := len(pod.OwnerReferences); n > 1 {
		return forbidden(a, fmt.Errorf("node %q can only create pods with a single owner reference set to itself", nodeName))
	} else if n == 1 {
		o := pod.OwnerReferences[0]
		if o.APIVersion != "v1" || o.Kind != "Node" || o.Name != nodeName {
			return forbidden(a, fmt.Errorf("node %q can only create pods with an owner reference set to itself", nodeName))
		}
		if o.Controller == nil || !*o.Controller {
			return forbidden(a, fmt.Errorf("node %q can only create pods with a controller owner reference set to itself", nodeName))
		}
		if o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
			return forbidden(a, fmt.Errorf("node %q must not set blockOwnerDeletion on an owner reference", nodeName))
		}
	}
	if pod.Spec.ServiceAccountName != "" {
		return forbidden(a, fmt.Errorf("node %q can not create pods that reference a service account", nodeName))
	}
	refs := podRefs(pod)
	switch {
	case refs.secrets:
		return forbidden(a, fmt.Errorf("node %q can not create pods that reference secrets", nodeName))
	case refs.configMaps:
		return forbidden(a, fmt.Errorf("node %q can not create pods that reference configmaps", nodeName))
	case refs.trustBundles:
		return forbidden(a, fmt.Errorf("node %q can not create pods that reference clustertrustbundles", nodeName))
	case refs.claims:
		return forbidden(a, fmt.Errorf("node %q can not create pods that reference persistentvolumeclaims", nodeName))
	case len(pod.Spec.ResourceClaims) > 0:
		return forbidden(a, fmt.Errorf("node %q can not create pods that reference resourceclaims", nodeName))
	}
	return nil
}

func admitPodStatus(nodeName string, a *admission.Attributes) error {
	if a.Operation != admission.Update {
		return forbidden(a, fmt.Errorf("unexpected operation %q", a.Operation))
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
	}
	if old.Spec.NodeName != nodeName {
		return forbidden(a, fmt.Errorf("node %q can only update pod status for pods with spec.nodeName set to itself", nodeName))
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	if !equality.Semantic.DeepEqual(old.Labels, pod.Labels) {
		return forbidden(a, fmt.Errorf("node %q cannot update labels through pod status", nodeName))
	}
	if !equality.Semantic.DeepEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return forbidden(a, fmt.Errorf("node %q cannot update resource claim statues", nodeName))
	}
	return nil
}

func (p *Plugin) admitEviction(ctx context.Context, nodeName string, a *admission.Attributes) error {
	if a.Operation != admission.Create {
		return forbidden(a, fmt.Errorf("unexpected operation %s", a.Operation))
	}
	name := a.Name
	if name == "" {
		return forbidden(a, errors.New("could not determine pod from request data"))
	}
	o, err := p.cluster.Get(ctx, podsGR, a.Namespace, name)
	if err != nil {
		return forbidden(a, err)
	}
	if pod, ok := o.(*corev1.Pod); !ok || pod.Spec.NodeName != nodeName {
		return forbidden(a, fmt.Errorf("node %s can only evict pods with spec.nodeName set to itself", nodeName))
	}
	return nil
}

func admitPVCStatus(nodeName string, a *admission.Attributes) error {
	if a.Operation != admission.Update {
		return forbidden(a, fmt.Errorf("unexpected operation %q", a.Operation))
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	// Only status.capacity and status.conditions may change.
	o, n := old.DeepCopy(), pvc.DeepCopy()
	o.ResourceVersion, n.ResourceVersion = "", ""
	o.ManagedFields, n.ManagedFields = nil, nil
	o.Status.Capacity, n.Status.Capacity = nil, nil
	o.Status.Conditions, n.Status.Conditions = nil, nil
	if !equality.Semantic.DeepEqual(o, n) {
		return forbidden(a, fmt.Errorf("node %q is not allowed to update fields other than status.quantity and status.conditions", nodeName))
	}
	return nil
}

func admitNode(nodeName string, a *admission.Attributes) error {
	if a.Name != nodeName {
		return forbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", nodeName, a.Name))
	}
	switch a.Operation {
	case admission.Create:
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
		}
		if n.Spec.ConfigSource != nil {
			return forbidden(a, fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", nodeName))
		}
		if bad := forbiddenLabels(modifiedLabels(n.Labels, nil)); len(bad) > 0 {
			return forbidden(a, fmt.Errorf("node %q is not allowed to set the following labels: %s", nodeName, strings.Join(bad, ", ")))
		}
	case admission.Update:
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
		}
		old, ok := a.OldObject.(*corev1.Node)
		if !ok {
			return forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
		}
		if n.Spec.ConfigSource != nil && !equality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbidden(a, fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", nodeName))
		}
		if !equality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return forbidden(a, fmt.Errorf("node %q is not allowed to modify taints", nodeName))
		}
		if !equality.Semantic.DeepEqual(n.OwnerReferences, old.OwnerReferences) {
			return forbidden(a, fmt.Errorf("node %q is not allowed to modify ownerReferences", nodeName))
		}
		if bad := forbiddenLabels(modifiedLabels(n.Labels, old.Labels)); len(bad) > 0 {
			return forbidden(a, fmt.Errorf("is not allowed to modify labels: %s", strings.Join(bad, ", ")))
		}
	}
	return nil
}

// admitToken lets a node request a token only bound to a pod of its own that still
// exists with the bound UID.
func (p *Plugin) admitToken(ctx context.Context, nodeName string, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Subresource != "token" {
		return nil
	}
	tr, ok := a.Object.(*authenticationv1.TokenRequest)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" {
		return forbidden(a, errors.New("node requested token not bound to a pod"))
	}
	if ref.UID == "" {
		return forbidden(a, errors.New("node requested token with a pod binding without a uid"))
	}
	o, err := p.cluster.Get(ctx, podsGR, a.Namespace, ref.Name)
	if err != nil {
		return forbidden(a, err)
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Errorf("unexpected type %T", o))
	}
	if pod.UID != ref.UID {
		return forbidden(a, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != nodeName {
		return forbidden(a, errors.New("node requested token bound to a pod scheduled on a different node"))
	}
	return nil
}

// kubeletLabels are the kubernetes.io labels a kubelet sets on its own Node.
var kubeletLabels = map[string]bool{
	corev1.LabelHostname: true, corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true,
	corev1.LabelFailureDomainBetaZone: true, corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType: true, corev1.LabelInstanceTypeStable: true,
	corev1.LabelOSStable: true, corev1.LabelArchStable: true,
	"beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true,
}

func labelNamespace(key string) string {
	if i := strings.Index(key, "/"); i >= 0 {
		return key[:i]
	}
	return ""
}

func inDomain(ns, domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }

// isKubeletLabel: one of kubeletLabels, or under kubelet.kubernetes.io or node.kubernetes.io.
func isKubeletLabel(key string) bool {
	ns := labelNamespace(key)
	return kubeletLabels[key] || inDomain(ns, corev1.LabelNamespaceSuffixKubelet) || inDomain(ns, corev1.LabelNamespaceSuffixNode)
}

// forbiddenLabels are the keys among modified a node may not add, change or remove.
func forbiddenLabels(modified []string) []string {
	var out []string
	for _, k := range modified {
		ns := labelNamespace(k)
		kube := inDomain(ns, "kubernetes.io") || inDomain(ns, "k8s.io")
		if inDomain(ns, corev1.LabelNamespaceNodeRestriction) || (kube && !isKubeletLabel(k)) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// modifiedLabels are the keys whose presence or value differ.
func modifiedLabels(a, b map[string]string) []string {
	set := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			set[k] = true
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || v != w {
			set[k] = true
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	return out
}
