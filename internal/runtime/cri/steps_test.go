package cri

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/steps"
)

// recordedSteps is a Steps that keeps what it is told.
type recordedSteps struct {
	mu    sync.Mutex
	steps []Step
}

func (r *recordedSteps) Record(s Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

// describingNetwork describes its set-ups as runtime/network does.
type describingNetwork struct{ *fakeNetwork }

func (d describingNetwork) Setup(ctx context.Context, pod Pod) (NetworkResult, error) {
	res, err := d.fakeNetwork.Setup(ctx, pod)
	if err != nil {
		return res, err
	}
	gw := netip.AddrFrom4([4]byte{10, 88, 0, 0}).Next()
	res.Network, res.Plugins, res.Interface = "kubette", []string{"bridge", "host-local"}, "eth0"
	res.Addrs, res.Gateways = []netip.Prefix{netip.PrefixFrom(gw.Next(), 24)}, []netip.Addr{gw}
	return res, nil
}

func TestStepsOfAPod(t *testing.T) {
	e := newEnv(t)
	rec := &recordedSteps{}
	e.cfg.Steps = rec
	e.cfg.Network = describingNetwork{e.net}
	e.restart()
	sb, sbCfg := e.runSandbox("web", nil)
	id := e.createContainer(sb, sbCfg, "server", nil)
	rec.mu.Lock()
	n := len(rec.steps)
	rec.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d steps after CreateContainer, want the network's only: runc create is StartContainer's", n)
	}
	e.start(id)
	e.ctrs.ignore[syscall.SIGQUIT] = true // the image's stop signal: SIGKILL follows
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	// A second stop of the exited container sends nothing and tells nothing.
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	got := slices.Clone(rec.steps)
	rec.mu.Unlock()
	var kinds []steps.Kind
	for _, s := range got {
		kinds = append(kinds, s.Kind)
		if s.Pod != (steps.Pod{Namespace: "default", Name: "web", UID: "uid-web"}) || s.End.IsZero() || s.Took < 0 {
			t.Errorf("step %v: pod %+v, end %v, took %v", s.Kind, s.Pod, s.End, s.Took)
		}
		if s.Kind != steps.NetworkReady && s.Container != "server" {
			t.Errorf("step %v: container %q", s.Kind, s.Container)
		}
	}
	want := []steps.Kind{steps.NetworkReady, steps.ContainerCreated, steps.ContainerStarted, steps.ContainerStopped, steps.ContainerDeleted}
	if !slices.Equal(kinds, want) {
		t.Fatalf("steps %v, want %v", kinds, want)
	}
	if s := got[0]; s.Network != "kubette" || !slices.Equal(s.Plugins, []string{"bridge", "host-local"}) || s.Interface != "eth0" ||
		len(s.Addrs) != 1 || s.Addrs[0].Addr() != s.Gateways[0].Next() {
		t.Errorf("network step %+v", s)
	}
	if created, started := got[1], got[2]; started.End.Add(-started.Took).Before(created.End) {
		t.Errorf("runc start (ended %v after %v) began before runc create ended (%v)", started.End, started.Took, created.End)
	}
	if got[2].Pid != 42 {
		t.Errorf("started step pid %d, want the runtime's 42", got[2].Pid)
	}
	if s := got[3]; !slices.Equal(s.Signals, []string{"SIGQUIT", "SIGKILL"}) || !s.Exited || s.ExitCode != 137 {
		t.Errorf("stopped step %+v", s)
	}
}

func TestStepsOffByDefault(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("web", nil)
	id := e.createContainer(sb, sbCfg, "server", nil)
	before := e.ctrs.stateCalls()
	e.start(id)
	if n := e.ctrs.stateCalls() - before; n != 0 {
		t.Errorf("StartContainer without Steps asked the runtime's state %d times", n)
	}
}

// TestStepsOfAContainerNeverStarted: a container removed without a start was never in runc:
// no step tells of runc.
func TestStepsOfAContainerNeverStarted(t *testing.T) {
	e := newEnv(t)
	rec := &recordedSteps{}
	e.cfg.Steps = rec
	e.restart()
	sb, sbCfg := e.runSandbox("web", nil)
	id := e.createContainer(sb, sbCfg, "server", nil)
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.steps) != 1 || rec.steps[0].Kind != steps.NetworkReady {
		t.Errorf("steps %+v, want the network's only", rec.steps)
	}
}
