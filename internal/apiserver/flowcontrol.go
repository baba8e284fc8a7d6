package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/apiserver/flowcontrol"
	"github.com/kubette/kubette/internal/apiserver/watchcache"
)

// startFlowControl builds API Priority and Fairness over the server's watch caches and
// keeps the FlowSchemas' Dangling conditions until ctx ends; nil when
// Config.FlowControlSeats is negative. It must run after the caches are made.
func (s *Server) startFlowControl(ctx context.Context) *flowcontrol.Controller {
	if s.cfg.FlowControlSeats < 0 {
		return nil
	}
	c := flowcontrol.New(flowcontrol.Config{Source: s, Objects: s.objectCounts(), ServerConcurrencyLimit: s.cfg.FlowControlSeats, Logger: s.log})
	if client, err := kubernetes.NewForConfig(s.LoopbackConfig()); err == nil {
		go c.RunStatus(ctx, client.FlowcontrolV1())
	} else {
		s.log.Warn("flow control: no loopback client for the flow schemas' status", "err", err)
	}
	return c
}

// withFlowControl puts priority and fairness in front of h (when it is on).
func (s *Server) withFlowControl(h http.Handler) http.Handler {
	if s.apf == nil {
		return h
	}
	return s.apf.Handler(h)
}

// objectCounts are the watch caches by the group and resource they hold, so that a
// list's work estimate finds its count in one look-up.
type objectCounts map[schema.GroupResource]*watchcache.Cache

func (s *Server) objectCounts() objectCounts {
	m := objectCounts{}
	for _, r := range s.table.All() {
		if c := s.cacheFor(r); c != nil {
			m[schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Plural}] = c
		}
	}
	return m
}

// ObjectCount returns how many objects of a resource its watch cache holds, in all
// namespaces; ok is false for a resource without one (its lists take one seat).
func (m objectCounts) ObjectCount(gr schema.GroupResource) (int64, bool) {
	c := m[gr]
	if c == nil {
		return 0, false
	}
	return int64(c.Len()), true
}
