package interpodaffinity

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Preemption removes pods from a copy of a node and adds them back; AddPod
// and RemovePod keep the three counts in step, so Filter sees the change.
func TestPreFilterExtensionsFollowPods(t *testing.T) {
	ctx := context.Background()
	zone := map[string]string{"zone": "z1", "kubernetes.io/hostname": "n1"}
	nodes := []*corev1.Node{node("n1", zone)}
	// An existing pod whose anti-affinity rejects app=web in its zone, and one
	// app=db that the incoming pod's anti-affinity rejects.
	guard := makePod().Namespace("default").Name("guard").Node("n1").Label("role", "guard").PodAntiAffinityIn("app", "zone", "web").Obj()
	db := makePod().Namespace("default").Name("db").Node("n1").Label("app", "db").Obj()
	guard.UID, db.UID = "uid-guard", "uid-db"
	snap := newSnapshot([]*corev1.Pod{guard, db}, nodes)
	pl := newPlugin(t, nil, snap, testNamespaces())
	incoming := makePod().Namespace("default").Name("web").Label("app", "web").PodAntiAffinityIn("app", "zone", "db").Obj()

	state := framework.NewCycleState()
	if st := pl.PreFilter(ctx, state, incoming); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st.AsError())
	}
	ni, _ := snap.Get("n1")
	ni = ni.Clone()
	filter := func() string { return pl.Filter(ctx, state, incoming, ni).Message() }
	if got := filter(); got != ErrReasonAntiAffinityRulesNotMatch {
		t.Fatalf("with both pods: %q", got)
	}
	remove := func(p *corev1.Pod) {
		t.Helper()
		if err := ni.RemovePod(p); err != nil {
			t.Fatal(err)
		}
		if st := pl.RemovePod(ctx, state, incoming, p, ni); !st.IsSuccess() {
			t.Fatal(st.AsError())
		}
	}
	remove(db)
	if got := filter(); got != ErrReasonExistingAntiAffinityRulesNotMatch {
		t.Fatalf("without db: %q, want the guard's rule", got)
	}
	remove(guard)
	if got := filter(); got != "" {
		t.Fatalf("without both: %q, want a fit", got)
	}
	ni.AddPod(guard)
	if st := pl.AddPod(ctx, state, incoming, guard, ni); !st.IsSuccess() {
		t.Fatal(st.AsError())
	}
	if got := filter(); got != ErrReasonExistingAntiAffinityRulesNotMatch {
		t.Fatalf("guard back: %q", got)
	}
}
