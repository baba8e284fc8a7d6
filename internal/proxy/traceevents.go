package proxy

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// EventComponent is the source component of the proxy's Events, as upstream's kube-proxy.
const EventComponent = "kube-proxy"

// ReasonRulesSynced is the reason of the Normal Event the proxy records on a Service
// whose rules a sync changed. Upstream's kube-proxy records no such Event; kubette's
// does so that `kubette trace service/NAME` shows the proxy's step (Events are API
// requests, so they land in the API server's recorded timeline).
const ReasonRulesSynced = "RulesSynced"

// maxSyncEvents bounds the Events of one sync: a sync that changes more Services than
// that (a proxy restart's first sync, a mass change) reports the first ones in name order.
const maxSyncEvents = 50

// syncEvents reports, after each sync that wrote rules, which Services' rules changed.
// Its zero value is ready; it is owned by the sync loop. The broadcaster aggregates
// repeated Events and rate-limits them per Service (client-go's EventCorrelator).
type syncEvents struct {
	recorder record.EventRecorder
	// reported is each Service's model as of its last reported sync; nil until the
	// first sync, which only takes note (a restarted proxy re-applies every Service).
	reported map[serviceKey]modelEntry
}

// reportSynced records a RulesSynced Event on every Service whose model changed since
// the last sync that wrote rules. ctx owns the Event broadcaster.
func (p *Proxy) reportSynced(ctx context.Context) {
	e := &p.events
	if e.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: p.o.Client.CoreV1().Events("")})
		e.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: p.o.NodeName})
	}
	first := e.reported == nil
	next := make(map[serviceKey]modelEntry, len(p.models.entries))
	var changed []modelEntry
	for k, cur := range p.models.entries {
		if !cur.ok {
			continue // no rules (headless, ExternalName)
		}
		next[k] = cur
		old, seen := e.reported[k]
		if first || seen && old.svc == cur.svc && sameSlices(old.slices, cur.slices) {
			continue
		}
		if seen && old.svc.UID == cur.svc.UID && reflect.DeepEqual(old.out, cur.out) {
			continue // a change that touched no rule (status, labels)
		}
		changed = append(changed, cur)
	}
	e.reported = next
	sort.Slice(changed, func(i, j int) bool {
		a, b := changed[i].svc, changed[j].svc
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	if len(changed) > maxSyncEvents {
		p.log.Info("rules of many Services changed in one sync; Events only for the first", "services", len(changed), "events", maxSyncEvents)
		changed = changed[:maxSyncEvents]
	}
	for _, c := range changed {
		e.recorder.Event(c.svc, corev1.EventTypeNormal, ReasonRulesSynced, rulesMessage(p.o.NodeName, c.out))
	}
}

// rulesMessage says what the rules of a Service do now: each ClusterIP port and its
// endpoints (Synced iptables rules on node-1: 10.96.0.20:80/TCP → 3 ready endpoints).
func rulesMessage(node string, s iptables.Service) string {
	var ports []string
	for _, p := range s.Ports {
		ready := 0
		for _, e := range p.Endpoints {
			if e.Ready {
				ready++
			}
		}
		dest := fmt.Sprintf("%d ready endpoints", ready)
		switch {
		case ready == 1:
			dest = "1 ready endpoint"
		case ready == 0:
			dest = "no ready endpoint (rejected)"
		}
		if n := len(p.Endpoints) - ready; n > 0 {
			dest += fmt.Sprintf(", %d not ready", n)
		}
		target := fmt.Sprintf("%s:%d/%s", s.ClusterIPs[0], p.Port, p.Protocol)
		if p.NodePort != 0 {
			target += fmt.Sprintf(" (node port %d)", p.NodePort)
		}
		ports = append(ports, target+" → "+dest)
	}
	where := "iptables rules"
	if node != "" {
		where += " on node " + node
	}
	if len(ports) == 0 {
		return "Synced " + where + ": no ports"
	}
	return "Synced " + where + ": " + strings.Join(ports, "; ")
}
