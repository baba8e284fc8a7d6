package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Well-known labels a kubelet sets on its Node.
const (
	labelHostname = "kubernetes.io/hostname"
	labelOS       = "kubernetes.io/os"
	labelArch     = "kubernetes.io/arch"
	labelZone     = "topology.kubernetes.io/zone"
	labelRegion   = "topology.kubernetes.io/region"
)

// registerRetryMax bounds the backoff between registration attempts.
const registerRetryMax = 5 * time.Second

// register creates (or adopts) every Node and its Lease, Workers at a time.
// It retries what may pass later and stops at the first permanent error.
func (s *Sim) register(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *node)
	var wg sync.WaitGroup
	for range min(s.cfg.Workers, len(s.nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := s.retry(ctx, func() error { return s.registerNode(ctx, n) }); err != nil {
					cancel(fmt.Errorf("failed to register node %q: %w", n.name, err))
					return
				}
				if err := s.retry(ctx, func() error { return s.renewLease(ctx, n) }); err != nil {
					cancel(fmt.Errorf("failed to create the lease of node %q: %w", n.name, err))
					return
				}
				s.stats.nodes.Add(1)
			}
		}()
	}
feed:
	for _, n := range s.nodes {
		select {
		case work <- n:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

// retry runs f until it succeeds, fails permanently or ctx is done, with a
// growing pause between attempts.
func (s *Sim) retry(ctx context.Context, f func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := f()
		if err == nil || permanent(err) {
			return err
		}
		s.stats.errors.Add(1)
		s.cfg.Logger.Debug("retrying", "err", err, "after", delay)
		t := s.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		delay = min(2*delay, registerRetryMax)
	}
}

// permanent reports whether retrying a request cannot help.
func permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsMethodNotSupported(err) || errors.Is(err, context.Canceled)
}

// registerNode creates the Node of n or, when one of that name exists, adopts
// it: it keeps its pod CIDR and the labels and taints others added, adds the
// simulator's own, and rewrites its status.
func (s *Sim) registerNode(ctx context.Context, n *node) error {
	nodes := s.client.CoreV1().Nodes()
	now := metav1.NewTime(s.cfg.Clock.Now())
	n.readySince = now
	want := s.nodeObject(n, now)
	created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		n.uid = created.UID
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create node: %w", err)
	}
	cur, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to get existing node: %w", err)
	}
	if cidr, ok := s.adoptCIDR(n, cur); ok {
		want.Spec.PodCIDR, want.Spec.PodCIDRs = cidr.String(), []string{cidr.String()}
		want.Status.Conditions = s.conditions(n, now)
	}
	for _, c := range cur.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			n.readySince = c.LastTransitionTime
			want.Status.Conditions = s.conditions(n, now)
		}
	}
	upd := cur.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		upd.Labels[k] = v
	}
	upd.Spec.PodCIDR, upd.Spec.PodCIDRs = want.Spec.PodCIDR, want.Spec.PodCIDRs
	upd.Spec.ProviderID = cur.Spec.ProviderID
	if upd.Spec.ProviderID == "" {
		upd.Spec.ProviderID = want.Spec.ProviderID
	}
	upd.Spec.Taints = mergeTaints(cur.Spec.Taints, want.Spec.Taints)
	upd.Status = want.Status
	updated, err := nodes.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("failed to adopt existing node: %w", err)
	}
	updated.Status = want.Status
	updated, err = nodes.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("failed to update the status of adopted node: %w", err)
	}
	n.uid = updated.UID
	return nil
}

// adoptCIDR makes n use the pod CIDR an existing Node already has (pod CIDRs
// never change once set); ok reports a change.
func (s *Sim) adoptCIDR(n *node, cur *corev1.Node) (netip.Prefix, bool) {
	if cur.Spec.PodCIDR == "" {
		return netip.Prefix{}, false
	}
	cidr, err := netip.ParsePrefix(cur.Spec.PodCIDR)
	if err != nil || cidr == n.cidr {
		return netip.Prefix{}, false
	}
	pool, err := newIPPool(cidr)
	if err != nil {
		s.cfg.Logger.Warn("cannot use the pod CIDR of an existing node, keeping it but giving its pods no pool", "node", n.name, "podCIDR", cur.Spec.PodCIDR, "err", err)
		pool = &ipPool{prefix: cidr, used: []uint64{0}, first: 1, last: 0}
	}
	n.cidr, n.pool = cidr, pool
	return cidr, true
}

// mergeTaints returns have plus every taint of want it lacks (by key and effect).
func mergeTaints(have, want []corev1.Taint) []corev1.Taint {
	out := append([]corev1.Taint(nil), have...)
	for _, w := range want {
		found := false
		for _, h := range have {
			if h.Key == w.Key && h.Effect == w.Effect {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// nodeObject is the Node a kubelet would register for n.
func (s *Sim) nodeObject(n *node, now metav1.Time) *corev1.Node {
	labels := make(map[string]string, len(s.cfg.Labels)+6)
	for k, v := range s.cfg.Labels {
		labels[k] = v
	}
	labels[labelHostname] = n.name
	labels[labelOS] = "linux"
	labels[labelArch] = "amd64"
	labels[LabelSimulated] = "true"
	if s.cfg.Zones > 0 {
		labels[labelZone] = fmt.Sprintf("sim-zone-%d", n.index%s.cfg.Zones)
		labels[labelRegion] = "sim"
	}
	id := nodeID(n.name)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec: corev1.NodeSpec{
			PodCIDR:    n.cidr.String(),
			PodCIDRs:   []string{n.cidr.String()},
			ProviderID: "kubette-sim://" + n.name,
			Taints:     append([]corev1.Taint(nil), s.cfg.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    s.cfg.Capacity.DeepCopy(),
			Allocatable: s.cfg.Capacity.DeepCopy(),
			Conditions:  s.conditions(n, now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.ip.String()},
				{Type: corev1.NodeHostName, Address: n.name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: s.kubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: id, SystemUUID: id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32],
				BootID: id, KernelVersion: "6.1.0-kubette-sim", OSImage: "kubette simulated node",
				ContainerRuntimeVersion: "kubette-sim://" + KubeletVersion, KubeletVersion: KubeletVersion,
				OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
}

// nodeID is a stable 32-hex-digit identifier derived from a node name.
func nodeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

// conditions are the node conditions a healthy kubelet reports, heartbeat now.
func (s *Sim) conditions(n *node, now metav1.Time) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, st corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: st, LastHeartbeatTime: now, LastTransitionTime: n.readySince, Reason: reason, Message: msg}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// leaseObject is n's Lease renewed at now, owned by its Node as a kubelet's.
func (s *Sim) leaseObject(n *node, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.name, Namespace: LeaseNamespace, ResourceVersion: n.leaseRV,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.name, UID: n.uid}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(n.name),
			LeaseDurationSeconds: ptr.To(int32(s.cfg.LeaseDuration / time.Second)),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
}

// renewLease writes n's Lease with a fresh renewTime: an update from the last
// resourceVersion it wrote (one request), else create, else get and update.
func (s *Sim) renewLease(ctx context.Context, n *node) error {
	leases := s.client.CoordinationV1().Leases(LeaseNamespace)
	if n.leaseRV != "" {
		out, err := leases.Update(ctx, s.leaseObject(n, s.cfg.Clock.Now()), metav1.UpdateOptions{})
		if err == nil {
			n.leaseRV = out.ResourceVersion
			return nil
		}
		n.leaseRV = ""
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to renew lease: %w", err)
		}
		if apierrors.IsNotFound(err) {
			if gone, err := s.nodeGone(ctx, n); gone || err != nil {
				return err
			}
		}
	}
	out, err := leases.Create(ctx, s.leaseObject(n, s.cfg.Clock.Now()), metav1.CreateOptions{})
	if err == nil {
		n.leaseRV = out.ResourceVersion
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create lease: %w", err)
	}
	cur, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to get lease: %w", err)
	}
	n.leaseRV = cur.ResourceVersion
	out, err = leases.Update(ctx, s.leaseObject(n, s.cfg.Clock.Now()), metav1.UpdateOptions{})
	if err != nil {
		n.leaseRV = ""
		return fmt.Errorf("failed to renew lease: %w", err)
	}
	n.leaseRV = out.ResourceVersion
	return nil
}

// nodeGone checks whether n's Node still exists; when it does not, n is
// marked gone and left alone from then on.
func (s *Sim) nodeGone(ctx context.Context, n *node) (bool, error) {
	_, err := s.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsNotFound(err):
		s.markGone(n)
		return true, nil
	default:
		return false, fmt.Errorf("failed to get node: %w", err)
	}
}

func (s *Sim) markGone(n *node) {
	if n.gone.CompareAndSwap(false, true) {
		s.stats.nodes.Add(-1)
		s.cfg.Logger.Warn("simulated node was deleted, leaving it alone", "node", n.name)
	}
}

// updateNodeStatus gives n's conditions a fresh lastHeartbeatTime with a
// strategic merge patch (conditions merge by type, so others' stay).
func (s *Sim) updateNodeStatus(ctx context.Context, n *node) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": s.conditions(n, metav1.NewTime(s.cfg.Clock.Now()))}})
	if err != nil {
		return fmt.Errorf("failed to encode node status patch: %w", err)
	}
	_, err = s.client.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		s.markGone(n)
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to update node status: %w", err)
	}
	return nil
}

// startBeats schedules every node's heartbeats, spread evenly over their
// periods, and starts the dispatcher and the workers that send them.
func (s *Sim) startBeats(ctx context.Context, wg *sync.WaitGroup) {
	now := s.cfg.Clock.Now()
	period := s.cfg.leaseRenewPeriod()
	s.beatMu.Lock()
	for i := range s.nodes {
		s.plan.add(i, beatLease, spread(now, period, i, len(s.nodes)))
		s.plan.add(i, beatStatus, spread(now, s.cfg.StatusInterval, i, len(s.nodes)))
	}
	s.beatMu.Unlock()
	work := make(chan beat)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(work)
		s.dispatchBeats(ctx, work)
	}()
	for range min(s.cfg.Workers, len(s.nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				s.beat(ctx, b)
			}
		}()
	}
}

// dispatchBeats hands due heartbeats to the workers as the token bucket allows.
func (s *Sim) dispatchBeats(ctx context.Context, work chan<- beat) {
	for {
		s.beatMu.Lock()
		b, wait, ok := s.plan.next(s.cfg.Clock.Now())
		s.beatMu.Unlock()
		if ok {
			select {
			case work <- b:
				continue
			case <-ctx.Done():
				return
			}
		}
		var timer clock.Timer
		var timeout <-chan time.Time
		if wait >= 0 {
			timer = s.cfg.Clock.NewTimer(wait)
			timeout = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// beat sends one heartbeat and schedules the next of its kind.
func (s *Sim) beat(ctx context.Context, b beat) {
	n := s.nodes[b.node]
	if n.gone.Load() {
		return
	}
	var err error
	var interval time.Duration
	var failures *uint8
	switch b.kind {
	case beatLease:
		err, interval, failures = s.renewLease(ctx, n), s.cfg.LeaseRenewInterval, &n.leaseFailures
		if err == nil {
			s.stats.leases.Add(1)
		}
	case beatStatus:
		err, interval, failures = s.updateNodeStatus(ctx, n), s.cfg.StatusInterval, &n.statusFailures
		if err == nil {
			s.stats.statuses.Add(1)
		}
	}
	if ctx.Err() != nil || n.gone.Load() {
		return
	}
	if err != nil {
		s.stats.errors.Add(1)
		*failures = min(*failures+1, 6)
		interval = min(interval, 200*time.Millisecond<<*failures)
		s.cfg.Logger.Debug("heartbeat failed", "node", n.name, "kind", b.kind.String(), "retryAfter", interval, "err", err)
	} else {
		*failures = 0
	}
	s.beatMu.Lock()
	s.plan.add(int(b.node), b.kind, s.cfg.Clock.Now().Add(interval))
	s.beatMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// cleanup deletes the nodes and their Leases when Options.Cleanup asks for it,
// on a context of its own since ctx is usually done by now.
func (s *Sim) cleanup(ctx context.Context) error {
	if !s.cfg.Cleanup {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	work := make(chan *node)
	errs := make([]error, len(s.nodes))
	var wg sync.WaitGroup
	for range min(s.cfg.Workers, len(s.nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				errs[n.index] = s.deleteNode(ctx, n)
			}
		}()
	}
	for _, n := range s.nodes {
		if n.uid != "" { // registered by this simulator
			work <- n
		}
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to clean up the simulated nodes: %w", err)
	}
	s.cfg.Logger.Info("simulated nodes deleted", "nodes", len(s.nodes))
	return nil
}

// deleteNode deletes n's Node (only the one this simulator registered, by UID) and its Lease.
func (s *Sim) deleteNode(ctx context.Context, n *node) error {
	err := s.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to delete node %q: %w", n.name, err)
	}
	err = s.client.CoordinationV1().Leases(LeaseNamespace).Delete(ctx, n.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete lease %q: %w", n.name, err)
	}
	return nil
}
