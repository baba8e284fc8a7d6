package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
)

// statusRetries is how often one status update is tried, as upstream's nodeStatusUpdateRetry.
const statusRetries = 5

// runStatus posts the status at once, then every StatusInterval and whenever the runtime's
// readiness changes, until ctx is done.
func (a *Agent) runStatus(ctx context.Context) {
	readyErr := a.cfg.Runtime(ctx)
	a.postStatus(ctx, readyErr)
	statusTick := time.NewTicker(a.cfg.StatusInterval)
	defer statusTick.Stop()
	readyTick := time.NewTicker(a.cfg.ReadyInterval)
	defer readyTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-statusTick.C:
			readyErr = a.cfg.Runtime(ctx)
		case <-readyTick.C:
			now := a.cfg.Runtime(ctx)
			if sameReadiness(now, readyErr) {
				continue
			}
			readyErr = now
			a.log.Info("runtime readiness changed", "ready", now == nil, "err", now)
		}
		if ctx.Err() != nil {
			return
		}
		a.postStatus(ctx, readyErr)
	}
}

func sameReadiness(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// postStatus patches the Node's status, trying statusRetries times (re-reading the Node after
// a failure), and logs a failure: the next tick tries again.
func (a *Agent) postStatus(ctx context.Context, readyErr error) {
	var err error
	for i := 0; i < statusRetries; i++ {
		if err = a.tryPostStatus(ctx, readyErr, i > 0); err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
	a.log.Warn("update node status", "err", err)
}

func (a *Agent) tryPostStatus(ctx context.Context, readyErr error, reread bool) error {
	nodes := a.cfg.Client.CoreV1().Nodes()
	old := a.current()
	if reread || old == nil {
		got, err := nodes.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Someone deleted the Node: register it again.
			if err := a.register(ctx); err != nil {
				return err
			}
			got = a.current()
		} else if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		old = got
		a.setCurrent(got)
	}
	h, err := readHost(a.cfg.DataDir, a.cfg.RuntimeVersion, a.cfg.Version)
	if err != nil {
		return err
	}
	h.addresses, h.kubeletPort = a.cfg.Addresses(), a.cfg.KubeletPort
	updated := old.DeepCopy()
	setStatus(updated, h, readyErr, metav1.NewTime(a.cfg.Now()))
	patch, err := statusPatch(old, updated)
	if err != nil {
		return err
	}
	got, err := nodes.Patch(ctx, a.cfg.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch node status: %w", err)
	}
	a.setCurrent(got)
	return nil
}

// statusPatch is the strategic merge patch from old's status to updated's.
func statusPatch(old, updated *v1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Node{Status: old.Status})
	if err != nil {
		return nil, fmt.Errorf("encode node: %w", err)
	}
	newJSON, err := json.Marshal(v1.Node{Status: updated.Status})
	if err != nil {
		return nil, fmt.Errorf("encode node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node status patch: %w", err)
	}
	return patch, nil
}

// runLease keeps the node's Lease renewed every quarter of LeaseDuration, retrying failures
// from 200ms up to 7s, until ctx is done.
func (a *Agent) runLease(ctx context.Context) {
	var lease *coordinationv1.Lease
	interval := a.cfg.LeaseDuration / 4
	backoff := 200 * time.Millisecond
	for {
		var err error
		lease, err = a.renewLease(ctx, lease)
		wait := interval
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("renew node lease", "err", err)
			wait, backoff = backoff, min(backoff*2, 7*time.Second)
		} else {
			backoff = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// renewLease writes the Lease with a fresh renewTime, from last when known (no read), and
// returns what the API server stored; after a failure the next call reads it again.
func (a *Agent) renewLease(ctx context.Context, last *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := a.cfg.Client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	if last == nil {
		got, err := leases.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := leases.Create(ctx, a.leaseFrom(&coordinationv1.Lease{}), metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create lease: %w", err)
			}
			return created, nil
		case err != nil:
			return nil, fmt.Errorf("get lease: %w", err)
		}
		last = got
	}
	updated, err := leases.Update(ctx, a.leaseFrom(last), metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update lease: %w", err)
	}
	return updated, nil
}

// leaseFrom returns a copy of base held by this node, renewed now and owned by the Node.
func (a *Agent) leaseFrom(base *coordinationv1.Lease) *coordinationv1.Lease {
	l := base.DeepCopy()
	l.Name, l.Namespace = a.cfg.NodeName, v1.NamespaceNodeLease
	l.Spec.HolderIdentity = ptr.To(a.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(a.cfg.LeaseDuration / time.Second))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(a.cfg.Now()))
	if n := a.current(); n != nil && n.UID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	return l
}
