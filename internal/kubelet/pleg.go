package kubelet

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// pleg relists the runtime's sandboxes and containers every RelistPeriod and triggers a sync
// of every pod whose sandboxes or containers appeared, disappeared or changed state — pods
// the API no longer has among them, so that orphans are cleaned up — unless the pod's worker
// has already seen that very state (observed.go): the change is then the worker's own doing,
// e.g. the sandbox and container its sync just started, which it read back and reported.
type pleg struct {
	k    *Kubelet
	last map[types.UID]string // pod UID → fingerprint of its runtime objects
}

func (p *pleg) run(ctx context.Context) {
	t := p.k.clock.NewTicker(p.k.cfg.RelistPeriod)
	defer t.Stop()
	for {
		if err := p.relist(ctx); err != nil && ctx.Err() == nil {
			p.k.log.Warn("relist failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// relist lists the runtime once and triggers the pods that changed since the last relist.
func (p *pleg) relist(ctx context.Context) error {
	sbs, err := p.k.cfg.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("relist sandboxes: %w", err)
	}
	cs, err := p.k.cfg.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("relist containers: %w", err)
	}
	parts := map[types.UID][]string{}
	for _, sb := range sbs {
		uid := types.UID(sb.Labels[labelPodUID])
		if uid == "" {
			uid = types.UID(sb.GetMetadata().GetUid())
		}
		if uid == "" {
			continue // not a pod of a kubelet
		}
		parts[uid] = append(parts[uid], sandboxPart(sb.Id, sb.State))
	}
	for _, c := range cs {
		uid := types.UID(c.Labels[labelPodUID])
		if uid == "" {
			continue
		}
		parts[uid] = append(parts[uid], containerPart(c.Id, c.State))
	}
	now := make(map[types.UID]string, len(parts))
	for uid, ps := range parts {
		now[uid] = fingerprint(ps)
	}
	for uid, fp := range now {
		if old, ok := p.last[uid]; (!ok || old != fp) && !p.k.hasObserved(uid, fp) {
			p.k.trigger(uid)
		}
	}
	for uid := range p.last {
		if _, ok := now[uid]; !ok && !p.k.hasObserved(uid, "") {
			p.k.trigger(uid)
		}
	}
	p.last = now
	return nil
}
