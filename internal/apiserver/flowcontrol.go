package apiserver

import (
	"context"
	"net/http"

	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/apiserver/flowcontrol"
)

// startFlowControl builds API Priority and Fairness over the server's watch caches and
// keeps the FlowSchemas' Dangling conditions until ctx ends; nil when
// Config.FlowControlSeats is negative.
func (s *Server) startFlowControl(ctx context.Context) *flowcontrol.Controller {
	if s.cfg.FlowControlSeats < 0 {
		return nil
	}
	c := flowcontrol.New(flowcontrol.Config{Source: s, ServerConcurrencyLimit: s.cfg.FlowControlSeats, Logger: s.log})
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
