// Package quota measures what objects use of a ResourceQuota, as upstream's quota
// evaluators (pkg/quota/v1): for each resource (pods, services, claims, and the object
// count of any other resource) the names it charges (pods, requests.cpu,
// services.nodeports, count/deployments.apps, ...), what one object uses of them, and
// whether a quota's scopes select it. The quota controller sums the usage of a
// namespace's objects into status.used; the ResourceQuota admission plugin charges a
// new object's usage before it is written.
package quota

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// Evaluator knows what objects of one resource use.
type Evaluator interface {
	// GroupResource is the resource evaluated.
	GroupResource() schema.GroupResource
	// MatchingResources returns those of names that the resource's objects use.
	MatchingResources(names []corev1.ResourceName) []corev1.ResourceName
	// MatchesScope reports whether obj is selected by one scope selector of a quota.
	MatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error)
	// Constraints returns why obj may not be charged to a quota limiting required.
	Constraints(required []corev1.ResourceName, obj runtime.Object) error
	// Usage returns what obj uses at time now.
	Usage(obj runtime.Object, now time.Time) (corev1.ResourceList, error)
}

// ObjectCountName is the count/<resource>[.<group>] name of a resource's object count.
func ObjectCountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// ParseObjectCountName returns the resource a count/ name counts.
func ParseObjectCountName(name corev1.ResourceName) (schema.GroupResource, bool) {
	rest, ok := strings.CutPrefix(string(name), "count/")
	if !ok || rest == "" {
		return schema.GroupResource{}, false
	}
	res, group, _ := strings.Cut(rest, ".")
	return schema.GroupResource{Group: group, Resource: res}, true
}

// legacyCountNames are the names counting core objects from before count/.
var legacyCountNames = map[schema.GroupResource]corev1.ResourceName{
	{Resource: "configmaps"}:             corev1.ResourceConfigMaps,
	{Resource: "resourcequotas"}:         corev1.ResourceQuotas,
	{Resource: "replicationcontrollers"}: corev1.ResourceReplicationControllers,
	{Resource: "secrets"}:                corev1.ResourceSecrets,
}

// For returns the evaluator of a resource: pods, services and claims have their own,
// every other resource is counted.
func For(gr schema.GroupResource) Evaluator {
	switch gr {
	case schema.GroupResource{Resource: "pods"}:
		return Pods{}
	case schema.GroupResource{Resource: "services"}:
		return Services{}
	case schema.GroupResource{Resource: "persistentvolumeclaims"}:
		return Claims{}
	}
	return ObjectCount{GR: gr, Alias: legacyCountNames[gr]}
}

// Resources returns the resources a quota limiting names charges, each once, sorted.
func Resources(names []corev1.ResourceName) []schema.GroupResource {
	seen := map[schema.GroupResource]bool{}
	for _, n := range names {
		switch {
		case n == corev1.ResourcePods || isPodComputeName(n):
			seen[schema.GroupResource{Resource: "pods"}] = true
		case n == corev1.ResourceServices || n == corev1.ResourceServicesLoadBalancers || n == corev1.ResourceServicesNodePorts:
			seen[schema.GroupResource{Resource: "services"}] = true
		case n == corev1.ResourcePersistentVolumeClaims || n == corev1.ResourceRequestsStorage:
			seen[schema.GroupResource{Resource: "persistentvolumeclaims"}] = true
		}
		if gr, ok := ParseObjectCountName(n); ok {
			seen[gr] = true
		}
		for gr, alias := range legacyCountNames {
			if alias == n {
				seen[gr] = true
			}
		}
	}
	out := make([]schema.GroupResource, 0, len(seen))
	for gr := range seen {
		out = append(out, gr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Selectors returns a quota's scopes and scope selector as one list of requirements.
func Selectors(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// Matches reports whether q limits obj: its scopes all select obj and it limits some
// resource the object uses (by status.hard, what the controller has observed).
func Matches(e Evaluator, q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	for _, sel := range Selectors(q) {
		ok, err := e.MatchesScope(sel, obj)
		if err != nil || !ok {
			return false, err
		}
	}
	return len(e.MatchingResources(Names(q.Status.Hard))) > 0, nil
}

// Names returns the resource names of a list, sorted.
func Names(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Add returns a + b.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range a {
		out[k] = v.DeepCopy()
	}
	for k, v := range b {
		if cur, ok := out[k]; ok {
			cur.Add(v)
			out[k] = cur
		} else {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// SubtractNonNegative returns a - b, with no value below zero.
func SubtractNonNegative(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range a {
		v = v.DeepCopy()
		if o, ok := b[k]; ok {
			v.Sub(o)
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, v.Format)
		}
		out[k] = v
	}
	return out
}

// Mask returns the entries of l named in names.
func Mask(l corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, n := range names {
		if v, ok := l[n]; ok {
			out[n] = v.DeepCopy()
		}
	}
	return out
}

// RemoveZeros returns l without its zero entries.
func RemoveZeros(l corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range l {
		if !v.IsZero() {
			out[k] = v
		}
	}
	return out
}

// Negative returns the names of negative entries of l.
func Negative(l corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, k := range Names(l) {
		if v := l[k]; v.Sign() < 0 {
			out = append(out, k)
		}
	}
	return out
}

// Exceeded returns the names in both lists whose used value is over hard.
func Exceeded(used, hard corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, k := range Names(used) {
		if h, ok := hard[k]; ok {
			if v := used[k]; v.Cmp(h) > 0 {
				out = append(out, k)
			}
		}
	}
	return out
}

// Equal reports whether two lists hold the same names with equal values.
func Equal(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		o, ok := b[k]
		if !ok || v.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// String prints a list as upstream's quota messages: name=value pairs, sorted, joined by commas.
func String(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, k := range Names(l) {
		v := l[k]
		parts = append(parts, string(k)+"="+v.String())
	}
	return strings.Join(parts, ",")
}

func one() resource.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }

func zero() resource.Quantity { return resource.Quantity{Format: resource.DecimalSI} }

// ObjectCount counts the objects of a resource (count/<resource>.<group>, and the
// legacy name of configmaps, secrets, replicationcontrollers and resourcequotas).
type ObjectCount struct {
	GR    schema.GroupResource
	Alias corev1.ResourceName
}

var _ Evaluator = ObjectCount{}

// GroupResource implements Evaluator.
func (o ObjectCount) GroupResource() schema.GroupResource { return o.GR }

// MatchingResources implements Evaluator.
func (o ObjectCount) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		if n == ObjectCountName(o.GR) || (o.Alias != "" && n == o.Alias) {
			out = append(out, n)
		}
	}
	return out
}

// MatchesScope implements Evaluator: scopes select only pods.
func (ObjectCount) MatchesScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

// Constraints implements Evaluator.
func (ObjectCount) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage implements Evaluator: one object.
func (o ObjectCount) Usage(runtime.Object, time.Time) (corev1.ResourceList, error) {
	out := corev1.ResourceList{ObjectCountName(o.GR): one()}
	if o.Alias != "" {
		out[o.Alias] = one()
	}
	return out, nil
}

// Services charges services, their node ports and load balancers.
type Services struct{}

var _ Evaluator = Services{}

var serviceNames = []corev1.ResourceName{"count/services", corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers}

// GroupResource implements Evaluator.
func (Services) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "services"}
}

// MatchingResources implements Evaluator.
func (Services) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	return intersect(names, serviceNames)
}

// MatchesScope implements Evaluator: scopes select only pods.
func (Services) MatchesScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

// Constraints implements Evaluator.
func (Services) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage implements Evaluator: a service, its node ports (each port of a NodePort or
// LoadBalancer service, only the explicit ones when a load balancer allocates none) and
// its load balancer.
func (Services) Usage(obj runtime.Object, _ time.Time) (corev1.ResourceList, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("expected a Service, got %T", obj)
	}
	out := corev1.ResourceList{"count/services": one(), corev1.ResourceServices: one(),
		corev1.ResourceServicesLoadBalancers: zero(), corev1.ResourceServicesNodePorts: zero()}
	ports := int64(len(svc.Spec.Ports))
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
			ports = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports++
				}
			}
		}
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
		out[corev1.ResourceServicesLoadBalancers] = one()
	}
	return out, nil
}

// Claims charges PersistentVolumeClaims and the storage they request.
type Claims struct{}

var _ Evaluator = Claims{}

var claimNames = []corev1.ResourceName{"count/persistentvolumeclaims", corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage}

// GroupResource implements Evaluator.
func (Claims) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "persistentvolumeclaims"}
}

// MatchingResources implements Evaluator.
func (Claims) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	return intersect(names, claimNames)
}

// MatchesScope implements Evaluator: scopes select only pods.
func (Claims) MatchesScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

// Constraints implements Evaluator.
func (Claims) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage implements Evaluator.
func (Claims) Usage(obj runtime.Object, _ time.Time) (corev1.ResourceList, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("expected a PersistentVolumeClaim, got %T", obj)
	}
	out := corev1.ResourceList{"count/persistentvolumeclaims": one(), corev1.ResourcePersistentVolumeClaims: one()}
	if s, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		out[corev1.ResourceRequestsStorage] = s.DeepCopy()
	}
	return out, nil
}

func intersect(names, known []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		for _, k := range known {
			if n == k {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// selectorMatches evaluates a scope selector requirement (In, NotIn, Exists,
// DoesNotExist) against value, present or not.
func selectorMatches(sel corev1.ScopedResourceSelectorRequirement, value string, present bool) (bool, error) {
	var op selection.Operator
	switch sel.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return false, fmt.Errorf("%q is not a valid scope selector operator", sel.Operator)
	}
	req, err := labels.NewRequirement(string(sel.ScopeName), op, sel.Values)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	set := labels.Set{}
	if present {
		set[string(sel.ScopeName)] = value
	}
	return req.Matches(set), nil
}
