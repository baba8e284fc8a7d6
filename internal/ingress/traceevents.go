package ingress

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Upstream ingress-nginx's Event reasons and messages, which the controller records on
// the Ingresses it serves so that `kubette trace ingress/NAME` shows its steps.
const (
	// ReasonSync: an Ingress of the controller's class was added or changed.
	ReasonSync = "Sync"
	// MessageScheduledForSync is ReasonSync's message.
	MessageScheduledForSync = "Scheduled for sync"
	// ReasonReload: nginx took a configuration in which the Ingress's part changed.
	// Upstream records it on the controller's pod; kubette has no such pod and records
	// it on each Ingress whose servers, locations or upstreams changed.
	ReasonReload = "RELOAD"
	// MessageReload is ReasonReload's message.
	MessageReload = "NGINX reload triggered due to a change in configuration"
)

// syncEvents remembers what the controller last reported. Owned by the sync loop.
type syncEvents struct {
	// seen is the resourceVersion of each served Ingress last reported; nil until
	// the first sync, which only takes note (a restarted controller reports nothing).
	seen map[types.UID]string
	// conf is the running configuration when last reported.
	conf []byte
}

// reportSynced records, after a sync, a Sync Event on each of the controller's Ingresses
// added or changed since the previous sync and, when nginx runs a new configuration, a
// RELOAD Event on each of them whose part of the configuration changed.
func (c *Controller) reportSynced(mine []*networkingv1.Ingress) {
	e := &c.events
	if c.recorder == nil {
		return
	}
	first := e.seen == nil
	seen := make(map[types.UID]string, len(mine))
	byKey := make(map[string]*networkingv1.Ingress, len(mine))
	for _, ing := range mine {
		seen[ing.UID] = ing.ResourceVersion
		byKey[ing.Namespace+"/"+ing.Name] = ing
		if rv, ok := e.seen[ing.UID]; !first && (!ok || rv != ing.ResourceVersion) {
			c.recorder.Event(ing, corev1.EventTypeNormal, ReasonSync, MessageScheduledForSync)
		}
	}
	e.seen = seen
	if bytes.Equal(e.conf, c.applied) {
		return
	}
	if !first && e.conf != nil {
		for _, key := range changedOwners(e.conf, c.applied) {
			if ing := byKey[key]; ing != nil {
				c.recorder.Event(ing, corev1.EventTypeNormal, ReasonReload, MessageReload)
			}
		}
	}
	e.conf = c.applied
}
