package podtopologyspread

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Preemption removes pods from a copy of a node and adds them back; AddPod
// and RemovePod keep the counts and the critical paths in step.
func TestPreFilterExtensionsFollowPods(t *testing.T) {
	ctx := context.Background()
	nodes := []*corev1.Node{
		makeNode().Name("a").Label("zone", "a").Obj(),
		makeNode().Name("b").Label("zone", "b").Obj(),
	}
	// Zone a holds two matching pods, zone b none: max skew 1 rejects a.
	a1 := makePod().Namespace("default").Name("a1").Node("a").Label("foo", "").Obj()
	a2 := makePod().Namespace("default").Name("a2").Node("a").Label("foo", "").Obj()
	a1.UID, a2.UID = "uid-a1", "uid-a2"
	snap := newSnapshot([]*corev1.Pod{a1, a2}, nodes)
	pl := newPlugin(t, snap)
	incoming := makePod().Namespace("default").Name("p").Label("foo", "").
		SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj()
	state := framework.NewCycleState()
	if st := pl.PreFilter(ctx, state, incoming); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st.AsError())
	}
	ni, _ := snap.Get("a")
	ni = ni.Clone()
	fits := func() bool { return pl.Filter(ctx, state, incoming, ni).IsSuccess() }
	if fits() {
		t.Fatal("zone a fits with two pods")
	}
	if err := ni.RemovePod(a1); err != nil {
		t.Fatal(err)
	}
	if st := pl.RemovePod(ctx, state, incoming, a1, ni); !st.IsSuccess() {
		t.Fatal(st.AsError())
	}
	if fits() {
		t.Fatal("zone a fits with one pod (skew 2 with the incoming)")
	}
	if err := ni.RemovePod(a2); err != nil {
		t.Fatal(err)
	}
	if st := pl.RemovePod(ctx, state, incoming, a2, ni); !st.IsSuccess() {
		t.Fatal(st.AsError())
	}
	if !fits() {
		t.Fatal("zone a does not fit once empty")
	}
	ni.AddPod(a1)
	if st := pl.AddPod(ctx, state, incoming, a1, ni); !st.IsSuccess() {
		t.Fatal(st.AsError())
	}
	if fits() {
		t.Fatal("zone a fits with a1 back")
	}
	// A pod of another namespace never counts.
	other := makePod().Namespace("other").Name("o").Node("a").Label("foo", "").Obj()
	if st := pl.RemovePod(ctx, state, incoming, other, ni); !st.IsSuccess() || state == nil {
		t.Fatal(st.AsError())
	}
	if fits() {
		t.Fatal("a pod of another namespace changed the count")
	}
}
