package controller_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv"
)

// probe is a controller that records which manager runs it.
type probe struct {
	id      string
	mu      *sync.Mutex
	running map[string]bool
}

func (p probe) Run(ctx context.Context, _ int) {
	p.mu.Lock()
	p.running[p.id] = true
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.running[p.id] = false
	p.mu.Unlock()
}

func TestLeaderElectionHandsOver(t *testing.T) {
	for _, killed := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "killed"}[killed], func(t *testing.T) { testHandOver(t, killed) })
	}
}

// testHandOver: b takes over from a, at once when a releases the lease on stop, or
// within the lease duration when a is killed and the lease must expire.
func testHandOver(t *testing.T, killed bool) {
	env := testenv.Start(t, testenv.Options{})
	var mu sync.Mutex
	running := map[string]bool{}
	start := func(id string, keep bool) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		o := controller.ManagerOptions{
			Config: env.Config, LeaderElect: true, Identity: id, KeepLeaseOnStop: keep,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Controllers: map[string]controller.Constructor{"probe": func(controller.Deps) (controller.Runner, error) {
				return probe{id: id, mu: &mu, running: running}, nil
			}},
		}
		go func() { _ = controller.RunManager(ctx, o) }()
		return cancel
	}
	leaders := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for id, r := range running {
			if r {
				out = append(out, id)
			}
		}
		return out
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if l := leaders(); len(l) == 1 && l[0] == want {
				return
			}
			if l := leaders(); len(l) > 1 {
				t.Fatalf("two leaders at once: %v", l)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("leader is %v, want %s", leaders(), want)
	}
	stopA := start("a", killed)
	waitFor("a")
	stopB := start("b", false)
	defer stopB()
	// b must not act while a holds the lease.
	for i := 0; i < 20; i++ {
		if l := leaders(); len(l) != 1 || l[0] != "a" {
			t.Fatalf("leaders %v while a holds the lease", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	lease, err := env.Client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-controller-manager", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "a" {
		t.Fatalf("lease holder: %v %v", lease, err)
	}
	stopped := time.Now()
	stopA()
	waitFor("b")
	took := time.Since(stopped)
	if killed && took < time.Second {
		t.Fatalf("b took over %v after a was killed, before a's lease could expire", took)
	}
	t.Logf("b leads %v after a stopped (killed=%v)", took, killed)
}
