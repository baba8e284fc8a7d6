package cri

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/steps"
)

// Step is one thing the server did for a pod (runtime/steps.Step).
type Step = steps.Step

// Steps is told, after each of a pod's runtime steps — its sandbox's network set-up and
// its containers' runc create, start, kill and delete — what was done (runtime/steps.Recorder).
// Record must not block. Config.Steps nil: nobody is told.
type Steps interface {
	Record(Step)
}

// stepPod names the pod of a sandbox from its metadata.
func stepPod(md *runtimeapi.PodSandboxMetadata) steps.Pod {
	return steps.Pod{Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid()}
}

// noteNetwork tells cfg.Steps that a sandbox's network was set up, begun at start.
func (s *Server) noteNetwork(md *runtimeapi.PodSandboxMetadata, res NetworkResult, start time.Time) {
	if s.cfg.Steps == nil {
		return
	}
	end := time.Now()
	s.cfg.Steps.Record(Step{Kind: steps.NetworkReady, Pod: stepPod(md), End: end, Took: end.Sub(start),
		Network: res.Network, Plugins: res.Plugins, Interface: res.Interface, Addrs: res.Addrs, Gateways: res.Gateways})
}

// noteContainer tells cfg.Steps that a runc step of c, begun at start, ended now; fill adds
// what only the step knows (nil: nothing). Containers whose sandbox is gone are not told.
func (s *Server) noteContainer(kind steps.Kind, c *container, start time.Time, fill func(*Step)) {
	if s.cfg.Steps == nil {
		return
	}
	end := time.Now()
	s.mu.Lock()
	sb, ok := s.sandboxes[c.meta.SandboxID]
	name := c.cfg.GetMetadata().GetName()
	s.mu.Unlock()
	if !ok {
		return
	}
	st := Step{Kind: kind, Pod: stepPod(sb.cfg.GetMetadata()), End: end, Took: end.Sub(start), Container: name}
	if fill != nil {
		fill(&st)
	}
	s.cfg.Steps.Record(st)
}

// initPid is a just-started container's init pid (0 when unknown): the low-level runtime
// answers from the init it has just noted, without a `runc state`.
func (s *Server) initPid(ctx context.Context, id string) int {
	st, err := s.cfg.Containers.State(ctx, id)
	if err != nil {
		return 0
	}
	return st.Pid
}

// noteStopped, deferred by stopContainer, tells cfg.Steps that c stopped after the signals
// it was sent (none: it had exited already, nothing to tell), begun at start, with its exit
// code when known.
func (s *Server) noteStopped(c *container, start time.Time, signals *[]string, err *error) {
	if s.cfg.Steps == nil || *err != nil || len(*signals) == 0 {
		return
	}
	s.noteContainer(steps.ContainerStopped, c, start, func(st *Step) {
		st.Signals = *signals
		s.mu.Lock()
		f := c.meta.Final
		s.mu.Unlock()
		if f != nil {
			st.Exited, st.ExitCode = true, int(f.ExitCode)
		}
	})
}
