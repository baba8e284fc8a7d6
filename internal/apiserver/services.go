package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver/servicealloc"
	"github.com/kubette/kubette/internal/storage"
)

// Defaults of the service ranges, as upstream's kube-apiserver flags.
const (
	DefaultServiceClusterIPRange = "10.96.0.0/12"
	DefaultServiceNodePortRange  = "30000-32767"
	defaultServiceRepairInterval = 3 * time.Minute
	// repairsBeforeLeakRelease is how many consecutive repairs must see a value taken
	// by no Service before it is freed (upstream's numRepairsBeforeLeakCleanup).
	repairsBeforeLeakRelease = 3
)

// serviceAllocators are the Service cluster IP and node port allocators and their repair state.
type serviceAllocators struct {
	ips   *servicealloc.IPs
	ports *servicealloc.Ports
	// ready is closed once the first repair rebuilt both bitmaps from the stored Services.
	ready     chan struct{}
	ipLeaks   map[int]int
	portLeaks map[int]int
}

func newServiceAllocators(cfg Config) (*serviceAllocators, error) {
	prefix := cfg.ServiceClusterIPRange
	if !prefix.IsValid() {
		prefix = netip.MustParsePrefix(DefaultServiceClusterIPRange)
	}
	prefix, err := servicealloc.ParseCIDR(prefix.String())
	if err != nil {
		return nil, err
	}
	ports := cfg.ServiceNodePortRange
	if ports.Size == 0 {
		ports, _ = servicealloc.ParsePortRange(DefaultServiceNodePortRange)
	}
	return &serviceAllocators{
		ips: servicealloc.NewIPs(cfg.Store, prefix), ports: servicealloc.NewPorts(cfg.Store, ports),
		ready: make(chan struct{}), ipLeaks: map[int]int{}, portLeaks: map[int]int{},
	}, nil
}

// FirstServiceIP is the first address of the service range, the kubernetes Service's.
func (s *Server) FirstServiceIP() netip.Addr { return s.svc.ips.First() }

func (a *serviceAllocators) waitReady(ctx context.Context) error {
	select {
	case <-a.ready:
		return nil
	case <-ctx.Done():
		return apierrors.NewServiceUnavailable("service IP and port allocation is not ready yet")
	}
}

func needsClusterIP(svc *corev1.Service) bool { return svc.Spec.Type != corev1.ServiceTypeExternalName }

func isHeadless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone || (len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone)
}

func needsNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeLoadBalancer && (svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts))
}

func needsHealthCheckPort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// serviceTxn is what one write allocated (to release when the write fails) and what the
// previous state held that the new one drops (to release when the write succeeds).
type serviceTxn struct {
	a                  *serviceAllocators
	newIPs, oldIPs     []netip.Addr
	newPorts, oldPorts []int
}

// finish releases what the outcome of the write left unused. Releases outlive a cancelled
// request; a release that fails leaves a leak the repair loop frees.
func (t *serviceTxn) finish(ok bool) {
	if t == nil {
		return
	}
	ips, ports := t.newIPs, t.newPorts
	if ok {
		ips, ports = t.oldIPs, t.oldPorts
	}
	if len(ips) == 0 && len(ports) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = t.a.ips.Release(ctx, ips...)
	_ = t.a.ports.Release(ctx, ports...)
}

// Allocate gives a Service being created (old nil) or updated its cluster IP, node
// ports and health check node port, and defaults its IP family fields, as upstream's
// service REST storage does before validation (the registry.Allocator of services). The
// returned function must be called with whether the write succeeded. Other objects pass
// untouched.
func (a *serviceAllocators) Allocate(ctx context.Context, obj, oldObj runtime.Object, dryRun bool) (func(bool), error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return func(bool) {}, nil
	}
	var old *corev1.Service
	if oldObj != nil {
		old = oldObj.(*corev1.Service)
		dropTypeDependentFields(svc, old)
	}
	if err := a.waitReady(ctx); err != nil {
		return nil, err
	}
	t := &serviceTxn{a: a}
	err := a.allocateServiceFields(ctx, svc, old, t, dryRun)
	if dryRun {
		t = nil
	}
	if err != nil {
		t.finish(false)
		return nil, err
	}
	return t.finish, nil
}

func (a *serviceAllocators) allocateServiceFields(ctx context.Context, svc, old *corev1.Service, t *serviceTxn, dryRun bool) error {
	spec := &svc.Spec
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	// Cluster IPs.
	oldNeeds := old != nil && needsClusterIP(old)
	if needsClusterIP(svc) {
		if errs := defaultIPFamilies(svc); len(errs) > 0 {
			return apierrors.NewInvalid(serviceKind, svc.Name, errs)
		}
		if !oldNeeds && !isHeadless(svc) {
			if err := a.allocateClusterIP(ctx, svc, t, dryRun); err != nil {
				return err
			}
		}
	}
	if oldNeeds {
		for _, ip := range serviceIPs(old) {
			if !containsIP(serviceIPs(svc), ip) {
				t.oldIPs = append(t.oldIPs, ip)
			}
		}
	}
	// Node ports (shared by ports of different protocols) and the health check node port.
	oldPorts := map[int]bool{}
	if old != nil {
		for _, p := range servicePorts(old) {
			oldPorts[p] = true
		}
	}
	kept := map[int]bool{}
	path := field.NewPath("spec", "ports")
	for i := range spec.Ports {
		p := &spec.Ports[i]
		switch {
		case p.NodePort != 0 && (oldPorts[int(p.NodePort)] || kept[int(p.NodePort)]):
			kept[int(p.NodePort)] = true
		case p.NodePort != 0 && (needsNodePorts(svc) || spec.Type == corev1.ServiceTypeLoadBalancer):
			if err := a.allocatePort(ctx, int(p.NodePort), path.Index(i).Child("nodePort"), svc.Name, dryRun); err != nil {
				return err
			}
			kept[int(p.NodePort)] = true
			t.newPorts = append(t.newPorts, int(p.NodePort))
		case p.NodePort == 0 && needsNodePorts(svc):
			port, err := a.nextPort(ctx, dryRun, kept)
			if err != nil {
				return err
			}
			p.NodePort = int32(port)
			kept[port] = true
			t.newPorts = append(t.newPorts, port)
		}
	}
	if hc := int(spec.HealthCheckNodePort); needsHealthCheckPort(svc) {
		switch {
		case hc != 0 && (oldPorts[hc] || kept[hc]):
			kept[hc] = true
		case hc != 0:
			if err := a.allocatePort(ctx, hc, field.NewPath("spec", "healthCheckNodePort"), svc.Name, dryRun); err != nil {
				return err
			}
			kept[hc] = true
			t.newPorts = append(t.newPorts, hc)
		default:
			port, err := a.nextPort(ctx, dryRun, kept)
			if err != nil {
				return err
			}
			spec.HealthCheckNodePort = int32(port)
			kept[port] = true
			t.newPorts = append(t.newPorts, port)
		}
	}
	for p := range oldPorts {
		if !kept[p] {
			t.oldPorts = append(t.oldPorts, p)
		}
	}
	return nil
}

var serviceKind = corev1.SchemeGroupVersion.WithKind("Service").GroupKind()

// allocateClusterIP takes the requested address or the next free one.
func (a *serviceAllocators) allocateClusterIP(ctx context.Context, svc *corev1.Service, t *serviceTxn, dryRun bool) error {
	spec := &svc.Spec
	if spec.ClusterIP == "" && len(spec.ClusterIPs) == 0 {
		var ip netip.Addr
		var err error
		if dryRun {
			ip, err = a.ips.PeekNext(ctx)
		} else {
			ip, err = a.ips.AllocateNext(ctx)
		}
		if errors.Is(err, servicealloc.ErrFull) {
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %w", err))
		}
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %w", err))
		}
		if !dryRun {
			t.newIPs = append(t.newIPs, ip)
		}
		spec.ClusterIP, spec.ClusterIPs = ip.String(), []string{ip.String()}
		return nil
	}
	if len(spec.ClusterIPs) == 0 || spec.ClusterIP != spec.ClusterIPs[0] {
		return nil // validation reports the mismatch
	}
	ip, err := netip.ParseAddr(spec.ClusterIPs[0])
	if err != nil {
		return nil // validation reports the malformed address
	}
	if dryRun {
		err = a.ips.Check(ctx, ip)
	} else {
		err = a.ips.Allocate(ctx, ip)
	}
	var nir *servicealloc.NotInRangeError
	if errors.Is(err, servicealloc.ErrAllocated) || errors.As(err, &nir) {
		return apierrors.NewInvalid(serviceKind, svc.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), ip.String(),
			fmt.Sprintf("failed to allocate IP %s: %v", ip, err))})
	}
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate IP %s: %w", ip, err))
	}
	if !dryRun {
		t.newIPs = append(t.newIPs, ip)
	}
	return nil
}

func (a *serviceAllocators) allocatePort(ctx context.Context, port int, path *field.Path, name string, dryRun bool) error {
	var err error
	if dryRun {
		err = a.ports.Check(ctx, port)
	} else {
		err = a.ports.Allocate(ctx, port)
	}
	var nir *servicealloc.NotInRangeError
	if errors.Is(err, servicealloc.ErrPortAllocated) || errors.As(err, &nir) {
		return apierrors.NewInvalid(serviceKind, name, field.ErrorList{field.Invalid(path, port, err.Error())})
	}
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate port %d: %w", port, err))
	}
	return nil
}

// nextPort takes the next free node port; a dry run picks one without taking it, passing
// over the ports the request already holds.
func (a *serviceAllocators) nextPort(ctx context.Context, dryRun bool, held map[int]bool) (int, error) {
	var port int
	var err error
	if dryRun {
		port, err = a.ports.PeekNext(ctx, held)
	} else {
		port, err = a.ports.AllocateNext(ctx)
	}
	if err != nil {
		return 0, apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err))
	}
	return port, nil
}

// defaultIPFamilies sets ipFamilyPolicy and ipFamilies for this single-stack IPv4 cluster,
// as upstream's service REST does, and refuses what the cluster cannot serve.
func defaultIPFamilies(svc *corev1.Service) field.ErrorList {
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	headless := isHeadless(svc)
	if p := spec.IPFamilyPolicy; p != nil && *p == corev1.IPFamilyPolicyRequireDualStack && !(headless && len(spec.Selector) == 0) {
		errs = append(errs, field.Invalid(specPath.Child("ipFamilyPolicy"), *p, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range spec.IPFamilies {
		if f != corev1.IPv4Protocol {
			errs = append(errs, field.Invalid(specPath.Child("ipFamilies").Index(i), f, "not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if spec.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		if headless && len(spec.Selector) == 0 {
			// As upstream: selectorless headless Services may carry every family.
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &policy
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	return nil
}

// dropTypeDependentFields clears, on a type change, the fields the new type does not use
// when the client left them as they were (upstream's service strategy).
func dropTypeDependentFields(svc, old *corev1.Service) {
	if needsClusterIP(old) && !needsClusterIP(svc) {
		if sameStrings(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) && svc.Spec.ClusterIP == old.Spec.ClusterIP {
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		}
		if len(svc.Spec.IPFamilies) == len(old.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if svc.Spec.IPFamilyPolicy != nil && old.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == *old.Spec.IPFamilyPolicy {
			svc.Spec.IPFamilyPolicy = nil
		}
		if svc.Spec.InternalTrafficPolicy != nil && old.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == *old.Spec.InternalTrafficPolicy {
			svc.Spec.InternalTrafficPolicy = nil
		}
	}
	if needsNodePorts(old) && !needsNodePorts(svc) && sameNodePorts(svc, old) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheckPort(old) && !needsHealthCheckPort(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if a, b := svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts; a != nil && b != nil && *a == *b {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if a, b := svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass; a != nil && b != nil && *a == *b {
			svc.Spec.LoadBalancerClass = nil
		}
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
	if !externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameNodePorts reports whether every node port of svc is one old had (or none is set).
func sameNodePorts(svc, old *corev1.Service) bool {
	had := map[int32]bool{}
	for _, p := range old.Spec.Ports {
		had[p.NodePort] = true
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !had[p.NodePort] {
			return false
		}
	}
	return true
}

// serviceIPs are the cluster IPs a stored Service holds.
func serviceIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// servicePorts are the node ports (and health check node port) a stored Service holds.
func servicePorts(svc *corev1.Service) []int {
	var out []int
	seen := map[int]bool{}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !seen[int(p.NodePort)] {
			seen[int(p.NodePort)] = true
			out = append(out, int(p.NodePort))
		}
	}
	if hc := int(svc.Spec.HealthCheckNodePort); hc != 0 && !seen[hc] {
		out = append(out, hc)
	}
	return out
}

func containsIP(list []netip.Addr, ip netip.Addr) bool {
	for _, v := range list {
		if v == ip {
			return true
		}
	}
	return false
}

// Release frees what a deleted Service held (other objects are ignored).
func (a *serviceAllocators) Release(obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok {
		(&serviceTxn{a: a, oldIPs: serviceIPs(svc), oldPorts: servicePorts(svc)}).finish(true)
	}
}

// runServiceRepair rebuilds both bitmaps from the stored Services at start (retrying
// until it succeeds, then opening allocation) and every interval after, as upstream's
// repair controllers: values a Service holds are marked taken, values no Service holds
// are freed once seen leaked by repairsBeforeLeakRelease consecutive runs.
func (s *Server) runServiceRepair(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = defaultServiceRepairInterval
	}
	// The first repair writes the allocation records: it waits until every watch cache
	// has listed, so that the caches start from the store's revision at start-up and a
	// watch from then on (resourceVersion=1 on a fresh store) replays all that followed.
	for _, c := range s.caches {
		if err := c.WaitReady(ctx); err != nil {
			return
		}
	}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		err := s.repairServices(ctx)
		if err == nil {
			break
		}
		s.log.Warn("repair service IP and port allocations", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	close(s.svc.ready)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.repairServices(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("repair service IP and port allocations", "err", err)
			}
		}
	}
}

// repairServices runs one repair of both bitmaps.
func (s *Server) repairServices(ctx context.Context) error {
	a := s.svc
	ipsUsed := func(ctx context.Context) (map[int]bool, error) {
		svcs, err := s.storedServices(ctx)
		if err != nil {
			return nil, err
		}
		used := map[int]bool{}
		for _, svc := range svcs {
			if !needsClusterIP(svc) {
				continue
			}
			for _, ip := range serviceIPs(svc) {
				off, err := a.ips.Offset(ip)
				if err != nil {
					s.log.Warn("service cluster IP is not in the service range", "service", svc.Namespace+"/"+svc.Name, "ip", ip, "range", a.ips.Prefix())
					continue
				}
				if used[off] {
					s.log.Warn("service cluster IP is held by more than one Service", "service", svc.Namespace+"/"+svc.Name, "ip", ip)
				}
				used[off] = true
			}
		}
		return used, nil
	}
	if err := a.ips.Bitmap().Rebuild(ctx, ipsUsed, a.ipLeaks, repairsBeforeLeakRelease); err != nil {
		return fmt.Errorf("repair cluster IPs: %w", err)
	}
	portsUsed := func(ctx context.Context) (map[int]bool, error) {
		svcs, err := s.storedServices(ctx)
		if err != nil {
			return nil, err
		}
		used := map[int]bool{}
		r := a.ports.Range()
		for _, svc := range svcs {
			for _, p := range servicePorts(svc) {
				if !r.Contains(p) {
					s.log.Warn("service node port is not in the node port range", "service", svc.Namespace+"/"+svc.Name, "port", p, "range", r.String())
					continue
				}
				used[p-r.Base] = true
			}
		}
		return used, nil
	}
	if err := a.ports.Bitmap().Rebuild(ctx, portsUsed, a.portLeaks, repairsBeforeLeakRelease); err != nil {
		return fmt.Errorf("repair node ports: %w", err)
	}
	return nil
}

// storedServices reads every Service from storage (not the cache: the repair must see
// every write that happened before it read the bitmap).
func (s *Server) storedServices(ctx context.Context) ([]*corev1.Service, error) {
	r, _ := s.table.Lookup(schemaCoreV1, "services")
	decode := s.storageDecoder(r)
	res, err := s.cfg.Store.List(ctx, r.Prefix(""), storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	out := make([]*corev1.Service, 0, len(res.Items))
	for _, kv := range res.Items {
		obj, err := decode(kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		if svc, ok := obj.(*corev1.Service); ok {
			out = append(out, svc)
		}
	}
	return out, nil
}
