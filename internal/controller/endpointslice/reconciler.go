package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubette/kubette/internal/controller/endpointslice/podendpoint"
	"github.com/kubette/kubette/internal/controller/podstate"
)

// Well-known labels and annotations of the slices the controller manages.
const (
	// ControllerName is the value of the managed-by label on the controller's slices.
	ControllerName = "endpointslice-controller.k8s.io"
	// triggerTimeAnnotation is upstream's v1.EndpointsLastChangeTriggerTime.
	triggerTimeAnnotation = corev1.EndpointsLastChangeTriggerTime
)

// serviceKind is the kind of the owner reference on every managed slice.
var serviceKind = corev1.SchemeGroupVersion.WithKind("Service")

// nodeGetter returns a node by name (a lister's Get).
type nodeGetter func(name string) (*corev1.Node, error)

// plan is what one reconciliation writes, in the order it writes it.
type plan struct {
	create, update, remove []*discoveryv1.EndpointSlice
}

// desiredGroup is the endpoints of one port mapping, in pod order.
type desiredGroup struct {
	ports []discoveryv1.EndpointPort
	order []string
	byKey map[string]*discoveryv1.Endpoint
}

func (g *desiredGroup) add(ep *discoveryv1.Endpoint) {
	k := endpointKey(ep)
	if _, ok := g.byKey[k]; ok {
		return
	}
	g.order = append(g.order, k)
	g.byKey[k] = ep
}

func (g *desiredGroup) len() int { return len(g.byKey) }

// take removes and returns the endpoint with key k.
func (g *desiredGroup) take(k string) (*discoveryv1.Endpoint, bool) {
	ep, ok := g.byKey[k]
	if ok {
		delete(g.byKey, k)
	}
	return ep, ok
}

// pop removes and returns the first remaining endpoint.
func (g *desiredGroup) pop() *discoveryv1.Endpoint {
	for len(g.order) > 0 {
		k := g.order[0]
		g.order = g.order[1:]
		if ep, ok := g.take(k); ok {
			return ep
		}
	}
	return nil
}

// endpointKey identifies an endpoint across syncs: the pod it targets and its addresses.
func endpointKey(ep *discoveryv1.Endpoint) string {
	var b strings.Builder
	if ep.TargetRef != nil {
		b.WriteString(ep.TargetRef.Namespace + "/" + ep.TargetRef.Name)
	}
	if ep.Hostname != nil {
		b.WriteString("#" + *ep.Hostname)
	}
	addrs := append([]string(nil), ep.Addresses...)
	sort.Strings(addrs)
	b.WriteString("@" + strings.Join(addrs, ","))
	return b.String()
}

// portKey identifies a port mapping: the sorted ports.
func portKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		var name, proto, app string
		var num int32
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		if p.Port != nil {
			num = *p.Port
		}
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		parts = append(parts, name+"/"+proto+"/"+strconv.Itoa(int(num))+"/"+app)
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// addressTypes returns the slice address types a Service gets, as upstream:
// its IP families; for a Service without them, the family of its cluster IP,
// or both for a legacy headless Service.
func addressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		out = append(out, addressTypeOf(f))
	}
	if len(out) > 0 {
		return out
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if f := podendpoint.FamilyOf(ip); f != "" {
			return []discoveryv1.AddressType{addressTypeOf(f)}
		}
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
}

func addressTypeOf(f corev1.IPFamily) discoveryv1.AddressType {
	if f == corev1.IPv6Protocol {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

func familyOf(t discoveryv1.AddressType) corev1.IPFamily {
	if t == discoveryv1.AddressTypeIPv6 {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// endpointPorts resolves the Service's ports on pod, in the Service's order;
// ports the pod does not have are left out.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	ports := []discoveryv1.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, err := podendpoint.FindPort(pod, sp)
		if err != nil {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		ports = append(ports, discoveryv1.EndpointPort{Name: &name, Port: &num, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	return ports
}

// podToEndpoint builds the pod's endpoint of address type at, or nil when
// the pod has no address of that family.
func podToEndpoint(pod *corev1.Pod, node *corev1.Node, svc *corev1.Service, at discoveryv1.AddressType) *discoveryv1.Endpoint {
	ip := podendpoint.IPOfFamily(pod, familyOf(at))
	if ip == "" {
		return nil
	}
	serving := svc.Spec.PublishNotReadyAddresses || podstate.IsPodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	// A terminating pod is never ready, unless the Service publishes every address.
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := &discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		nodeName := pod.Spec.NodeName
		ep.NodeName = &nodeName
	}
	if node != nil {
		if zone, ok := node.Labels[corev1.LabelTopologyZone]; ok && zone != "" {
			ep.Zone = &zone
		}
	}
	if podendpoint.ShouldSetHostname(pod, svc) {
		hostname := pod.Spec.Hostname
		ep.Hostname = &hostname
	}
	return ep
}

// sliceLabels returns the labels a managed slice of svc carries: the
// Service's own (minus the reserved ones), the headless marker, the Service
// name and the managed-by label; and whether they differ from the slice's.
func sliceLabels(slice *discoveryv1.EndpointSlice, svc *corev1.Service) (map[string]string, bool) {
	lbls := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if k == discoveryv1.LabelServiceName || k == discoveryv1.LabelManagedBy {
			continue
		}
		lbls[k] = v
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		lbls[corev1.IsHeadlessService] = ""
	} else {
		delete(lbls, corev1.IsHeadlessService)
	}
	lbls[discoveryv1.LabelServiceName] = svc.Name
	lbls[discoveryv1.LabelManagedBy] = ControllerName
	changed := slice == nil || !equality.Semantic.DeepEqual(map[string]string(lbls), nonNil(slice.Labels))
	return lbls, changed
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// slicePrefix is the generateName of a Service's slices: "<service>-" when
// that is a valid prefix, else the name.
func slicePrefix(name string) string {
	if len(validation.IsDNS1123Subdomain(name+"-a")) != 0 {
		return name
	}
	return name + "-"
}

// newSlice returns an empty slice of svc with the given ports and address type.
func newSlice(svc *corev1.Service, ports []discoveryv1.EndpointPort, at discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	lbls, _ := sliceLabels(nil, svc)
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    slicePrefix(svc.Name),
			Namespace:       svc.Namespace,
			Labels:          lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, serviceKind)},
		},
		AddressType: at,
		Ports:       append([]discoveryv1.EndpointPort{}, ports...),
		Endpoints:   []discoveryv1.Endpoint{},
	}
}

// ownedBy reports whether svc controls slice.
func ownedBy(slice *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	ref := metav1.GetControllerOfNoCopy(slice)
	return ref != nil && ref.Kind == "Service" && ref.APIVersion == "v1" && ref.UID == svc.UID
}

// isPlaceholder reports whether slice is the empty slice svc gets when it has
// no endpoints.
func isPlaceholder(slice *discoveryv1.EndpointSlice, svc *corev1.Service, at discoveryv1.AddressType) bool {
	if slice.AddressType != at || len(slice.Ports) != 0 || len(slice.Endpoints) != 0 || !ownedBy(slice, svc) {
		return false
	}
	_, changed := sliceLabels(slice, svc)
	return !changed
}

// planService computes the minimal writes that make existing (the managed
// slices of svc) match pods. Pods on a node missing from the cache are left
// out and reported in the error, so the Service is retried.
func (c *Controller) planService(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice, getNode nodeGetter) (plan, error) {
	types := addressTypes(svc)
	wanted := make(map[discoveryv1.AddressType]bool, len(types))
	for _, t := range types {
		wanted[t] = true
	}
	var p plan
	// Listers return objects in no particular order: sort, so that the
	// same state always gives the same writes.
	existing = append([]*discoveryv1.EndpointSlice(nil), existing...)
	sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })
	byType := make(map[discoveryv1.AddressType][]*discoveryv1.EndpointSlice)
	for _, s := range existing {
		if !wanted[s.AddressType] {
			p.remove = append(p.remove, s)
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}

	pods = append([]*corev1.Pod(nil), pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var errs []error
	for _, at := range types {
		sub, err := c.planAddressType(svc, pods, byType[at], at, getNode)
		if err != nil {
			errs = append(errs, err)
		}
		p.create = append(p.create, sub.create...)
		p.update = append(p.update, sub.update...)
		p.remove = append(p.remove, sub.remove...)
	}

	// A Service without endpoints keeps (or gets) one empty placeholder slice.
	if len(existing) == len(p.remove) && len(p.create) == 0 {
		ph := newSlice(svc, nil, types[0])
		ph.Ports = []discoveryv1.EndpointPort{}
		if len(p.remove) == 1 && isPlaceholder(p.remove[0], svc, types[0]) {
			p.remove = nil
		} else {
			p.create = append(p.create, ph)
		}
	}

	// Rather than deleting a slice and creating another, rewrite the old one.
	for i := 0; i < len(p.remove) && len(p.create) > 0; {
		old := p.remove[i]
		fresh := p.create[len(p.create)-1]
		if old.AddressType != fresh.AddressType || !ownedBy(old, svc) {
			i++
			continue
		}
		reused := old.DeepCopy()
		reused.Labels = fresh.Labels
		reused.OwnerReferences = fresh.OwnerReferences
		reused.Ports = fresh.Ports
		reused.Endpoints = fresh.Endpoints
		p.create = p.create[:len(p.create)-1]
		p.update = append(p.update, reused)
		p.remove = append(p.remove[:i], p.remove[i+1:]...)
	}
	return p, errors.Join(errs...)
}

// planAddressType plans the slices of one address type.
func (c *Controller) planAddressType(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice,
	at discoveryv1.AddressType, getNode nodeGetter) (plan, error) {
	var p plan
	var errs []error
	existingByPorts := make(map[string][]*discoveryv1.EndpointSlice)
	for _, s := range existing {
		if !ownedBy(s, svc) {
			p.remove = append(p.remove, s)
			continue
		}
		k := portKey(s.Ports)
		existingByPorts[k] = append(existingByPorts[k], s)
	}

	desired := make(map[string]*desiredGroup)
	var keys []string
	for _, pod := range pods {
		if !podendpoint.ShouldPodBeInEndpoints(pod, true) {
			continue
		}
		var node *corev1.Node
		if pod.Spec.NodeName != "" {
			n, err := getNode(pod.Spec.NodeName)
			if apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("skipping pod %s/%s of Service %s/%s: node %s not found",
					pod.Namespace, pod.Name, svc.Namespace, svc.Name, pod.Spec.NodeName))
				continue
			}
			if err != nil {
				return plan{}, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
			}
			node = n
		}
		ep := podToEndpoint(pod, node, svc, at)
		if ep == nil {
			continue
		}
		ports := endpointPorts(svc, pod)
		k := portKey(ports)
		g, ok := desired[k]
		if !ok {
			g = &desiredGroup{ports: ports, byKey: make(map[string]*discoveryv1.Endpoint)}
			desired[k] = g
			keys = append(keys, k)
		}
		g.add(ep)
	}

	for _, k := range keys {
		sub := c.planPortMapping(svc, existingByPorts[k], desired[k], at)
		p.create, p.update, p.remove = append(p.create, sub.create...), append(p.update, sub.update...), append(p.remove, sub.remove...)
	}
	var gone []string
	for k := range existingByPorts {
		if _, ok := desired[k]; !ok {
			gone = append(gone, k)
		}
	}
	sort.Strings(gone)
	for _, k := range gone {
		sub := c.planPortMapping(svc, existingByPorts[k], &desiredGroup{byKey: map[string]*discoveryv1.Endpoint{}}, at)
		p.create, p.update, p.remove = append(p.create, sub.create...), append(p.update, sub.update...), append(p.remove, sub.remove...)
	}
	return p, errors.Join(errs...)
}

// planPortMapping plans the slices of one port mapping: existing slices keep
// the endpoints still wanted (updated in place when any changed), empty ones
// go, the remaining endpoints fill the slices being updated first (fullest
// first), then unchanged slices, then new slices.
func (c *Controller) planPortMapping(svc *corev1.Service, existing []*discoveryv1.EndpointSlice, want *desiredGroup, at discoveryv1.AddressType) plan {
	var p plan
	var unchanged []*discoveryv1.EndpointSlice
	for _, s := range existing {
		var kept []discoveryv1.Endpoint
		changed := false
		for i := range s.Endpoints {
			got := &s.Endpoints[i]
			if ep, ok := want.take(endpointKey(got)); ok {
				kept = append(kept, *ep)
				if !equality.Semantic.DeepEqual(*ep, *got) {
					changed = true
				}
			}
		}
		lbls, labelsChanged := sliceLabels(s, svc)
		switch {
		case len(kept) == 0:
			// Nothing wanted is left in it (an empty placeholder included:
			// the placeholder logic keeps it only while nothing else exists).
			p.remove = append(p.remove, s)
		case changed || len(kept) != len(s.Endpoints):
			u := s.DeepCopy()
			u.Endpoints = kept
			u.Labels = lbls
			p.update = append(p.update, u)
		case labelsChanged:
			u := s.DeepCopy()
			u.Labels = lbls
			p.update = append(p.update, u)
		default:
			unchanged = append(unchanged, s)
		}
	}

	limit := c.maxEndpointsPerSlice
	if want.len() > 0 && len(p.update) > 0 {
		sort.SliceStable(p.update, func(i, j int) bool { return len(p.update[i].Endpoints) > len(p.update[j].Endpoints) })
		for _, s := range p.update {
			for len(s.Endpoints) < limit && want.len() > 0 {
				s.Endpoints = append(s.Endpoints, *want.pop())
			}
		}
	}
	// What is left goes, as upstream, into the fullest unchanged slice that
	// takes all of it; failing that (unlike upstream, which then creates
	// slices at once), unchanged slices with room are filled, fullest first,
	// so that slices grown one sync at a time stay packed; then new slices.
	if n := want.len(); n > 0 && n < limit {
		best := -1
		for i, s := range unchanged {
			if len(s.Endpoints)+n <= limit && (best < 0 || len(s.Endpoints) > len(unchanged[best].Endpoints)) {
				best = i
			}
		}
		if best >= 0 {
			p.update = append(p.update, c.fillSlice(svc, unchanged[best], want))
			unchanged = append(unchanged[:best], unchanged[best+1:]...)
		}
	}
	if want.len() > 0 {
		sort.SliceStable(unchanged, func(i, j int) bool { return len(unchanged[i].Endpoints) > len(unchanged[j].Endpoints) })
		for _, s := range unchanged {
			if want.len() == 0 {
				break
			}
			if len(s.Endpoints) < limit {
				p.update = append(p.update, c.fillSlice(svc, s, want))
			}
		}
	}
	for want.len() > 0 {
		fill := newSlice(svc, want.ports, at)
		for len(fill.Endpoints) < limit && want.len() > 0 {
			fill.Endpoints = append(fill.Endpoints, *want.pop())
		}
		p.create = append(p.create, fill)
	}
	return p
}

// fillSlice returns a copy of s, with current labels, topped up from want.
func (c *Controller) fillSlice(svc *corev1.Service, s *discoveryv1.EndpointSlice, want *desiredGroup) *discoveryv1.EndpointSlice {
	fill := s.DeepCopy()
	fill.Labels, _ = sliceLabels(fill, svc)
	for len(fill.Endpoints) < c.maxEndpointsPerSlice && want.len() > 0 {
		fill.Endpoints = append(fill.Endpoints, *want.pop())
	}
	return fill
}

// apply writes p: creations (unless the Service is being deleted), updates,
// then deletions, each stamped with the trigger time, and records every
// write in the tracker.
func (c *Controller) apply(ctx context.Context, svc *corev1.Service, p plan, trigger time.Time) error {
	var errs []error
	client := c.client.DiscoveryV1().EndpointSlices(svc.Namespace)
	if svc.DeletionTimestamp == nil {
		for _, s := range p.create {
			stampTriggerTime(s, trigger)
			created, err := client.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					break // every creation in a terminating namespace fails
				}
				errs = append(errs, fmt.Errorf("create EndpointSlice for Service %s/%s: %w", svc.Namespace, svc.Name, err))
				continue
			}
			c.tracker.Update(created)
		}
	}
	for _, s := range p.update {
		stampTriggerTime(s, trigger)
		updated, err := client.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("update EndpointSlice %s/%s: %w", s.Namespace, s.Name, err))
			continue
		}
		c.tracker.Update(updated)
	}
	for _, s := range p.remove {
		var opts metav1.DeleteOptions
		if s.UID != "" {
			uid := s.UID
			opts.Preconditions = &metav1.Preconditions{UID: &uid}
		}
		err := client.Delete(ctx, s.Name, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete EndpointSlice %s/%s: %w", s.Namespace, s.Name, err))
			continue
		}
		if err == nil {
			c.tracker.ExpectDeletion(s)
		}
	}
	return errors.Join(errs...)
}

// stampTriggerTime sets or clears the last-change-trigger-time annotation.
func stampTriggerTime(s *discoveryv1.EndpointSlice, trigger time.Time) {
	if trigger.IsZero() {
		delete(s.Annotations, triggerTimeAnnotation)
		return
	}
	if s.Annotations == nil {
		s.Annotations = make(map[string]string)
	}
	s.Annotations[triggerTimeAnnotation] = trigger.UTC().Format(time.RFC3339Nano)
}
