// Package triggertime computes the value of the
// endpoints.kubernetes.io/last-change-trigger-time annotation, as upstream's
// TriggerTimeTracker: the earliest time among the changes (a pod's readiness
// transition, the Service's creation) that a sync is the first to see.
package triggertime

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/controller/podstate"
)

// Tracker remembers, per Service, the trigger times it has already reported.
// It is safe for concurrent use.
type Tracker struct {
	mu     sync.Mutex
	states map[string]state
}

type state struct {
	pods    map[string]time.Time
	service time.Time
}

// New returns an empty tracker.
func New() *Tracker { return &Tracker{states: make(map[string]state)} }

// Compute returns the earliest trigger time among the changes of svc and its
// pods since the previous call for svc (zero when nothing changed), and
// remembers the current ones. Call it on every sync, even one that writes
// nothing, so that the state stays current.
func (t *Tracker) Compute(svc *corev1.Service, pods []*corev1.Pod) time.Time {
	key := svc.Namespace + "/" + svc.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.states[key]
	next := state{pods: make(map[string]time.Time, len(pods))}
	var earliest time.Time
	consider := func(tt time.Time) {
		if earliest.IsZero() || tt.Before(earliest) {
			earliest = tt
		}
	}
	for _, p := range pods {
		c := podstate.ReadyCondition(p)
		if c == nil || c.LastTransitionTime.IsZero() {
			continue
		}
		tt := c.LastTransitionTime.Time
		next.pods[p.Name] = tt
		if tt.After(prev.pods[p.Name]) {
			consider(tt)
		}
	}
	next.service = svc.CreationTimestamp.Time
	if next.service.After(prev.service) {
		consider(next.service)
	}
	t.states[key] = next
	return earliest
}

// Delete forgets the Service namespace/name.
func (t *Tracker) Delete(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.states, namespace+"/"+name)
}
