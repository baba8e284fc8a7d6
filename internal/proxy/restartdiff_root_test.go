package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// recordingRunner records the restores a Runner applies and the iptables
// commands it runs.
type recordingRunner struct {
	Runner
	mu       sync.Mutex
	restores []string
	commands [][]string
}

func (r *recordingRunner) Restore(ctx context.Context, data []byte) error {
	r.mu.Lock()
	r.restores = append(r.restores, string(data))
	r.mu.Unlock()
	return r.Runner.Restore(ctx, data)
}

func (r *recordingRunner) Iptables(ctx context.Context, args ...string) ([]byte, error) {
	r.mu.Lock()
	r.commands = append(r.commands, args)
	r.mu.Unlock()
	return r.Runner.Iptables(ctx, args...)
}

func (r *recordingRunner) recorded() ([]string, [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.restores...), append([][]string(nil), r.commands...)
}

// startSyncedProxy runs a proxy until stop (or the test's end) and waits for its
// first sync.
func startSyncedProxy(t *testing.T, client kubernetes.Interface, runner Runner) (p *Proxy, stop func()) {
	t.Helper()
	p, err := New(Options{Client: client, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
		MinSyncPeriod: 10 * time.Millisecond, Iptables: runner, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	stop = runProxy(t, p)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	if err := p.Stats().LastError; err != nil {
		t.Fatalf("first sync: %v", err)
	}
	return p, stop
}

// TestRestartWritesOnlyWhatChanged restarts the proxy over its own rules in a
// network namespace: with nothing changed the new proxy's first (full) sync
// writes nothing but the guard it installs at start and runs no hook check;
// with one endpoint replaced meanwhile it writes that Service's chains only
// and deletes the old endpoint's chain.
func TestRestartWritesOnlyWhatChanged(t *testing.T) {
	_, exec := testNetns(t)
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), exec); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	// internalTrafficPolicy Local with its endpoint on another node: the guard
	// holds a DROP for its ClusterIP.
	local := service("local", "10.96.0.12", 80)
	policy := corev1.ServiceInternalTrafficPolicyLocal
	local.Spec.InternalTrafficPolicy = &policy
	localSlice := endpointSlice("local", "local-1", 80, true, "10.244.2.9")
	node := "n2"
	localSlice.Endpoints[0].NodeName = &node
	client := fake.NewClientset(
		service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5", "10.244.1.6"),
		service("db", "10.96.0.11", 80), endpointSlice("db", "db-1", 5432, true, "10.244.1.7"),
		local, localSlice,
		service("empty", "10.96.0.20", 80))
	_, stopFirst := startSyncedProxy(t, client, exec)
	stopFirst()

	rec := &recordingRunner{Runner: exec}
	p, stop := startSyncedProxy(t, client, rec)
	stop()
	restores, commands := rec.recorded()
	// The guard goes in at start (without the Local DROP), so the full sync
	// puts the DROP back: the guard chain is all it writes.
	if len(restores) != 2 || restores[0] != string(iptables.GuardText(p.ipt)) ||
		!strings.Contains(restores[1], ":"+iptables.ChainGuard+" ") || strings.Count(restores[1], "\n:") != 1 {
		t.Errorf("restart over unchanged rules restored %d times:\n%s", len(restores), strings.Join(restores, "\n---\n"))
	}
	for _, c := range commands {
		if len(c) > 2 && c[2] == "-C" {
			t.Errorf("restart over unchanged rules checked a hook: %v", c)
		}
	}

	// One endpoint replaced while no proxy runs.
	ctx := context.Background()
	slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints[0].Addresses = []string{"10.244.1.8"}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec = &recordingRunner{Runner: exec}
	_, stop = startSyncedProxy(t, client, rec)
	stop()
	restores, _ = rec.recorded()
	spn := "default/db:http"
	oldSEP, newSEP := iptables.SEPChain(spn, "TCP", "10.244.1.7:5432"), iptables.SEPChain(spn, "TCP", "10.244.1.8:5432")
	all := strings.Join(restores[1:], "")
	for _, want := range []string{":" + iptables.SVCChain(spn, "TCP") + " ", ":" + newSEP + " ", "-X " + oldSEP + "\n"} {
		if !strings.Contains(all, want) {
			t.Errorf("the restart's full sync lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, iptables.SVCChain("default/web:http", "TCP")) || strings.Contains(all, ":KUBE-SERVICES ") {
		t.Errorf("the restart's full sync wrote unchanged chains:\n%s", all)
	}
	saved, err := exec.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(saved), oldSEP) || !strings.Contains(string(saved), "--to-destination 10.244.1.8:5432") {
		t.Errorf("after the restart:\n%s", saved)
	}
}
