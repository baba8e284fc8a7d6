package nodestatus_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/kubelet/nodestatus"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// readiness is a ReadyFunc tests flip.
type readiness struct {
	mu  sync.Mutex
	err error
}

func (r *readiness) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *readiness) ready(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// start runs an agent until the test ends (or stop is called) and returns stop.
func start(t *testing.T, cfg nodestatus.Config) (stop func()) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	a, err := nodestatus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func condition(n *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestRegisterStatusLease(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	rd := &readiness{err: errors.New("container runtime network not ready: no pod CIDR")}
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "node-a"}}
	taint := v1.Taint{Key: "example.com/dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}
	start(t, nodestatus.Config{
		NodeName: "node-a", Client: env.Client, PodCIDR: "10.244.1.0/24", KubeletPort: 10250,
		Addresses: func() []v1.NodeAddress { return addrs }, Labels: map[string]string{"tier": "test"},
		Taints: []v1.Taint{taint}, Runtime: rd.ready,
		StatusInterval: time.Second, ReadyInterval: 50 * time.Millisecond, LeaseDuration: 4 * time.Second,
	})

	var node *v1.Node
	poll.Until(t, "registered, NotReady", poll.Explain(func() (bool, string) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		c := condition(n, v1.NodeReady)
		return c != nil && c.Status == v1.ConditionFalse, "no NotReady condition yet"
	}))
	if c := condition(node, v1.NodeReady); c.Reason != "KubeletNotReady" || c.Message != "container runtime network not ready: no pod CIDR" {
		t.Errorf("NotReady condition %+v", c)
	}
	for k, v := range map[string]string{"kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH, "tier": "test"} {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Spec.PodCIDR != "10.244.1.0/24" || len(node.Spec.PodCIDRs) != 1 || len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != taint.Key {
		t.Errorf("spec %+v", node.Spec)
	}
	st := node.Status
	if cpu := st.Capacity[v1.ResourceCPU]; cpu.Value() != int64(runtime.NumCPU()) {
		t.Errorf("cpu capacity %s", cpu.String())
	}
	if pods := st.Allocatable[v1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("pods allocatable %s", pods.String())
	}
	memCap, memAlloc := st.Capacity[v1.ResourceMemory], st.Allocatable[v1.ResourceMemory]
	if memCap.Value() <= 0 || memCap.Value()-memAlloc.Value() != 100<<20 {
		t.Errorf("memory capacity %s allocatable %s", memCap.String(), memAlloc.String())
	}
	if eph := st.Capacity[v1.ResourceEphemeralStorage]; eph.Value() <= 0 {
		t.Errorf("ephemeral-storage capacity %s", eph.String())
	}
	info := st.NodeInfo
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if info.BootID != strings.TrimSpace(string(bootID)) || info.KernelVersion == "" || info.OSImage == "" ||
		info.KubeletVersion != controlplane.Version.GitVersion || info.ContainerRuntimeVersion != "kubette://"+strings.TrimPrefix(controlplane.Version.GitVersion, "v") ||
		info.OperatingSystem != "linux" || info.Architecture != runtime.GOARCH {
		t.Errorf("nodeInfo %+v", info)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != 10250 || len(st.Addresses) != 2 || st.Addresses[0] != addrs[0] {
		t.Errorf("endpoints %+v addresses %+v", st.DaemonEndpoints, st.Addresses)
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if c := condition(node, ct); c == nil || c.Reason == "" || c.Message == "" {
			t.Errorf("condition %s: %+v", ct, c)
		}
	}
	notReadySince := condition(node, v1.NodeReady).LastTransitionTime

	// Heartbeats move lastHeartbeatTime, not lastTransitionTime.
	firstBeat := condition(node, v1.NodeReady).LastHeartbeatTime
	poll.Until(t, "a later heartbeat", poll.Explain(func() (bool, string) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := condition(n, v1.NodeReady)
		if c.LastHeartbeatTime.After(firstBeat.Time) {
			if !c.LastTransitionTime.Equal(&notReadySince) {
				t.Errorf("transition time moved without a transition: %v → %v", notReadySince, c.LastTransitionTime)
			}
			return true, ""
		}
		return false, "heartbeat " + c.LastHeartbeatTime.String()
	}))

	// The Lease: held by the node, owned by it, renewed.
	var renew time.Time
	poll.Until(t, "lease", poll.Explain(func() (bool, string) {
		l, err := env.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if *l.Spec.HolderIdentity != "node-a" || *l.Spec.LeaseDurationSeconds != 4 || len(l.OwnerReferences) != 1 ||
			l.OwnerReferences[0].UID != node.UID || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].APIVersion != "v1" {
			t.Fatalf("lease %+v", l)
		}
		renew = l.Spec.RenewTime.Time
		return true, ""
	}))
	poll.Until(t, "lease renewed", poll.Explain(func() (bool, string) {
		l, err := env.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(renew), "renewTime " + l.Spec.RenewTime.String()
	}))

	// The runtime becomes ready: Ready flips at once (the status interval is not waited for).
	rd.set(nil)
	poll.Until(t, "Ready", poll.Explain(func() (bool, string) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := condition(n, v1.NodeReady)
		return c.Status == v1.ConditionTrue, c.Message
	}))
	n, _ := env.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if c := condition(n, v1.NodeReady); c.Reason != "KubeletReady" || c.Message != "kubelet is posting ready status" || c.LastTransitionTime.Before(&notReadySince) {
		t.Errorf("Ready condition %+v", c)
	}
	// And back.
	rd.set(errors.New("runtime gone"))
	poll.Until(t, "NotReady again", poll.Explain(func() (bool, string) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := condition(n, v1.NodeReady)
		return c.Status == v1.ConditionFalse && c.Message == "runtime gone", c.Message
	}))
}

func TestAdoptOnRestart(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	pre, err := env.Client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"kept": "yes", "kubernetes.io/hostname": "stale"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := nodestatus.Config{
		NodeName: "node-b", Client: env.Client, PodCIDR: "10.244.2.0/24", KubeletPort: 10250,
		Runtime:        func(context.Context) error { return nil },
		StatusInterval: time.Second, LeaseDuration: 4 * time.Second,
	}
	ready := func(what string) *v1.Node {
		var node *v1.Node
		poll.Until(t, what, poll.Explain(func() (bool, string) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			node = n
			c := condition(n, v1.NodeReady)
			return c != nil && c.Status == v1.ConditionTrue, "not Ready yet"
		}))
		return node
	}
	stop := start(t, cfg)
	n := ready("adopted and Ready")
	if n.UID != pre.UID || n.Labels["kept"] != "yes" || n.Labels["kubernetes.io/hostname"] != "node-b" || n.Spec.PodCIDR != "10.244.2.0/24" {
		t.Fatalf("adopted node: uid %s (was %s) labels %v podCIDR %q", n.UID, pre.UID, n.Labels, n.Spec.PodCIDR)
	}
	firstTransition := condition(n, v1.NodeReady).LastTransitionTime
	stop()

	// A restarted kubelet adopts its own Node: same UID, Ready keeps its transition time.
	start(t, cfg)
	poll.Until(t, "heartbeat from the restarted agent", poll.Explain(func() (bool, string) {
		n2, err := env.Client.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := condition(n2, v1.NodeReady)
		return c.LastHeartbeatTime.After(condition(n, v1.NodeReady).LastHeartbeatTime.Time), "no newer heartbeat"
	}))
	n2 := ready("Ready after the restart")
	if n2.UID != pre.UID || !condition(n2, v1.NodeReady).LastTransitionTime.Equal(&firstTransition) {
		t.Fatalf("after restart: uid %s, Ready %+v (first transition %v)", n2.UID, condition(n2, v1.NodeReady), firstTransition)
	}
	l, err := env.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-b", metav1.GetOptions{})
	if err != nil || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != pre.UID {
		t.Fatalf("lease after restart: %+v, %v", l, err)
	}
}
