package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller/endpointsubsets"
)

// endpointsKind is the kind of the slices' controller references.
var endpointsKind = corev1.SchemeGroupVersion.WithKind("Endpoints")

// errStaleCache reports that the slice cache has not caught up with the
// controller's own writes; the Endpoints are retried.
type errStaleCache struct{ key string }

// Error says which Endpoints wait for the cache.
func (e errStaleCache) Error() string {
	return fmt.Sprintf("EndpointSlice cache of %s is behind the controller's own writes", e.key)
}

// Sync mirrors the Endpoints of key ("namespace/name") into EndpointSlices, or deletes
// their mirrored slices when the Endpoints are gone or not to be mirrored, or their
// Service is gone or has a selector. It reads only the informer caches.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	ep, err := c.endpointsLister.Endpoints(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return c.deleteMirrored(ctx, namespace, name)
	}
	if err != nil {
		return fmt.Errorf("get Endpoints %s from cache: %w", key, err)
	}
	if !shouldMirror(ep) {
		return c.deleteMirrored(ctx, namespace, name)
	}
	svc, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return c.deleteMirrored(ctx, namespace, name)
	}
	if err != nil {
		return fmt.Errorf("get Service %s from cache: %w", key, err)
	}
	if svc.Spec.Selector != nil {
		// The endpoints controller and the EndpointSlice controller own these.
		return c.deleteMirrored(ctx, namespace, name)
	}
	slices, err := c.mirrored(namespace, name)
	if err != nil {
		return err
	}
	if c.tracker.Stale(types.NamespacedName{Namespace: namespace, Name: name}, slices) {
		return errStaleCache{key: key}
	}
	return c.apply(ctx, ep, c.plan(ep, slices))
}

// mirrored lists the cached slices mirrored from the Endpoints namespace/name.
func (c *Controller) mirrored(namespace, name string) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.Set{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}.AsSelectorPreValidated()
	slices, err := c.sliceLister.EndpointSlices(namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", namespace, name, err)
	}
	return slices, nil
}

// deleteMirrored deletes every mirrored slice of namespace/name.
func (c *Controller) deleteMirrored(ctx context.Context, namespace, name string) error {
	slices, err := c.mirrored(namespace, name)
	if err != nil {
		return err
	}
	c.tracker.DeleteService(namespace, name)
	var errs []error
	for _, s := range slices {
		if err := c.client.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete EndpointSlice %s/%s: %w", namespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// group is the desired content of the slices of one address type and port set.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	// endpoints by address, in the order they were added.
	endpoints map[string]*discoveryv1.Endpoint
	order     []string
}

func (g *group) add(ep *discoveryv1.Endpoint) {
	a := ep.Addresses[0]
	if _, ok := g.endpoints[a]; !ok {
		g.order = append(g.order, a)
	}
	g.endpoints[a] = ep
}

// groupKey identifies the slices of one address type and port set.
func groupKey(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
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
	return string(at) + "-" + strings.Join(parts, ";")
}

// sliceTypes are the address types mirrored; an address of any other kind is invalid.
var sliceTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}

// addressType is the slice address type of ip, false when it is not an IP.
func addressType(ip string) (discoveryv1.AddressType, bool) {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return "", false
	case a.Is4() || a.Is4In6():
		return discoveryv1.AddressTypeIPv4, true
	default:
		return discoveryv1.AddressTypeIPv6, true
	}
}

// endpointOf is the slice endpoint of an Endpoints address.
func endpointOf(a corev1.EndpointAddress, ready bool) *discoveryv1.Endpoint {
	ep := &discoveryv1.Endpoint{
		Addresses:  []string{a.IP},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		TargetRef:  a.TargetRef,
		NodeName:   a.NodeName,
	}
	if a.Hostname != "" {
		h := a.Hostname
		ep.Hostname = &h
	}
	return ep
}

// slicePorts are the slice ports of an Endpoints subset.
func slicePorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		p := p.DeepCopy()
		out = append(out, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol, AppProtocol: p.AppProtocol})
	}
	return out
}

// desired groups the addresses of ep's repacked subsets by address type and port
// set, at most maxPer addresses per subset (ready ones first), and records a warning
// event for invalid IPs and skipped addresses, as upstream.
func (c *Controller) desired(ep *corev1.Endpoints) map[string]*group {
	groups := make(map[string]*group)
	invalid, skipped := 0, 0
	for _, s := range endpointsubsets.Repack(ep.Subsets) {
		ports := slicePorts(s.Ports)
		byType := make(map[discoveryv1.AddressType]*group, len(sliceTypes))
		for _, at := range sliceTypes {
			k := groupKey(at, ports)
			if groups[k] == nil {
				groups[k] = &group{addressType: at, ports: ports, endpoints: make(map[string]*discoveryv1.Endpoint)}
			}
			byType[at] = groups[k]
		}
		added := 0
		add := func(addrs []corev1.EndpointAddress, ready bool) {
			for _, a := range addrs {
				if added >= c.maxPer {
					return
				}
				at, ok := addressType(a.IP)
				if !ok {
					invalid++
					continue
				}
				byType[at].add(endpointOf(a, ready))
				added++
			}
		}
		add(s.Addresses, true)
		add(s.NotReadyAddresses, false)
		skipped += len(s.Addresses) + len(s.NotReadyAddresses) - added
	}
	if c.recorder != nil {
		if invalid > 0 {
			c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonInvalidIPAddress,
				"Skipped %d invalid IP addresses when mirroring to EndpointSlices", invalid)
		}
		if skipped > invalid {
			c.recorder.Eventf(ep, corev1.EventTypeWarning, reasonTooManyAddressesToMirror,
				"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", c.maxPer, skipped)
		}
	}
	return groups
}

// plan is what a sync writes.
type plan struct {
	create, update, delete []*discoveryv1.EndpointSlice
}

// plan compares the desired groups of ep with its mirrored slices: per group, the
// first existing slice is kept when it holds exactly the desired endpoints and
// carries ep's labels and annotations, else rewritten; further slices of a group and
// slices of groups no longer desired are deleted; a group without a slice gets a new
// one. Creations are then turned into rewrites of slices about to be deleted of the
// same address type.
func (c *Controller) plan(ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice) plan {
	groups := c.desired(ep)
	byKey := make(map[string][]*discoveryv1.EndpointSlice)
	for _, s := range existing {
		k := groupKey(s.AddressType, s.Ports)
		byKey[k] = append(byKey[k], s)
	}
	var p plan
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, have := groups[k], byKey[k]
		if len(g.order) == 0 {
			p.delete = append(p.delete, have...)
			continue
		}
		name := ""
		if len(have) > 0 {
			p.delete = append(p.delete, have[1:]...)
			if c.upToDate(ep, have[0], g) {
				if !c.tracker.Has(have[0]) {
					c.tracker.Update(have[0])
				}
				continue
			}
			name = have[0].Name
		}
		s := c.newSlice(ep, g, name)
		if name == "" {
			p.create = append(p.create, s)
		} else {
			p.update = append(p.update, s)
		}
	}
	for k, have := range byKey {
		if _, ok := groups[k]; !ok {
			p.delete = append(p.delete, have...)
		}
	}
	recycle(&p)
	return p
}

// recycle turns each creation into the rewrite of a slice about to be deleted, of the
// same address type, as upstream.
func recycle(p *plan) {
	var create, del []*discoveryv1.EndpointSlice
	used := make(map[*discoveryv1.EndpointSlice]bool)
	for _, s := range p.create {
		var victim *discoveryv1.EndpointSlice
		for _, d := range p.delete {
			if !used[d] && d.AddressType == s.AddressType {
				victim = d
				break
			}
		}
		if victim == nil {
			create = append(create, s)
			continue
		}
		used[victim] = true
		s.GenerateName, s.Name = "", victim.Name
		p.update = append(p.update, s)
	}
	for _, d := range p.delete {
		if !used[d] {
			del = append(del, d)
		}
	}
	p.create, p.delete = create, del
}

// withoutKeys returns a copy of m without keys.
func withoutKeys(m map[string]string, keys ...string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// upToDate reports whether s holds exactly g's endpoints, with ep's labels and
// annotations, and is owned by this ep (not one of the same name deleted before).
func (c *Controller) upToDate(ep *corev1.Endpoints, s *discoveryv1.EndpointSlice, g *group) bool {
	if len(s.Endpoints) != len(g.order) {
		return false
	}
	for i := range s.Endpoints {
		have := &s.Endpoints[i]
		if len(have.Addresses) == 0 {
			return false
		}
		want, ok := g.endpoints[have.Addresses[0]]
		if !ok || !apiequality.Semantic.DeepEqual(want, have) {
			return false
		}
	}
	if !apiequality.Semantic.DeepEqual(ep.Labels, withoutKeys(s.Labels, discoveryv1.LabelManagedBy, discoveryv1.LabelServiceName)) {
		return false
	}
	if !apiequality.Semantic.DeepEqual(withoutKeys(ep.Annotations, corev1.EndpointsLastChangeTriggerTime, corev1.LastAppliedConfigAnnotation), s.Annotations) {
		return false
	}
	for _, ref := range s.OwnerReferences {
		if ref.Kind == "Endpoints" && ref.Name == ep.Name && ref.UID != ep.UID {
			return false
		}
	}
	return true
}

// slicePrefix is the generateName of the slices of name: "<name>-" when that is a
// valid prefix, else the name.
func slicePrefix(name string) string {
	if len(validation.IsDNS1123Subdomain(name+"-a")) != 0 {
		return name
	}
	return name + "-"
}

// newSlice builds the slice of group g of ep, named name (generated when empty), with
// ep's labels and annotations, at most maxPer endpoints, controlled by ep.
func (c *Controller) newSlice(ep *corev1.Endpoints, g *group, name string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ep.Namespace,
			Labels:          withoutKeys(ep.Labels),
			Annotations:     withoutKeys(ep.Annotations, corev1.EndpointsLastChangeTriggerTime, corev1.LastAppliedConfigAnnotation),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, endpointsKind)},
		},
		AddressType: g.addressType,
		Ports:       g.ports,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	if name == "" {
		s.GenerateName = slicePrefix(ep.Name)
	}
	s.Labels[discoveryv1.LabelServiceName] = ep.Name
	s.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	for _, a := range g.order {
		if len(s.Endpoints) >= c.maxPer {
			break
		}
		s.Endpoints = append(s.Endpoints, *g.endpoints[a])
	}
	return s
}

// apply writes the plan, tracking every write. Nothing is created for Endpoints being
// deleted, nor in a terminating namespace.
func (c *Controller) apply(ctx context.Context, ep *corev1.Endpoints, p plan) error {
	client := c.client.DiscoveryV1().EndpointSlices(ep.Namespace)
	if ep.DeletionTimestamp == nil {
		for _, s := range p.create {
			created, err := client.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					return nil
				}
				return fmt.Errorf("failed to create EndpointSlice for Endpoints %s/%s: %w", ep.Namespace, ep.Name, err)
			}
			c.tracker.Update(created)
		}
	}
	for _, s := range p.update {
		updated, err := client.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("failed to update %s EndpointSlice for Endpoints %s/%s: %w", s.Name, ep.Namespace, ep.Name, err)
		}
		c.tracker.Update(updated)
	}
	for _, s := range p.delete {
		if err := client.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete %s EndpointSlice for Endpoints %s/%s: %w", s.Name, ep.Namespace, ep.Name, err)
		}
		c.tracker.ExpectDeletion(s)
	}
	return nil
}
