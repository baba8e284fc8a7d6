package nodestatus

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseMemInfo(t *testing.T) {
	total, avail, err := parseMemInfo([]byte("MemTotal:        2048 kB\nMemFree:          100 kB\nMemAvailable:    1024 kB\n"))
	if err != nil || total != 2048*1024 || avail != 1024*1024 {
		t.Fatalf("got %d %d %v", total, avail, err)
	}
	if _, _, err := parseMemInfo([]byte("MemFree: 1 kB\n")); err == nil {
		t.Fatal("no MemTotal: no error")
	}
}

func TestParseOSRelease(t *testing.T) {
	if got := parseOSRelease([]byte("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")); got != "Debian GNU/Linux 12 (bookworm)" {
		t.Fatalf("got %q", got)
	}
	if got := parseOSRelease([]byte("NAME=x\n")); got != "Linux" {
		t.Fatalf("got %q", got)
	}
}

func TestSetStatusConditions(t *testing.T) {
	h := host{cpus: 2, memTotal: 4 << 30, memAvail: 2 << 30, fsSize: 100 << 30, fsAvail: 50 << 30, inodes: 1000, inodesFree: 500, kubeletPort: 10250}
	t1, t2, t3 := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0)), metav1.NewTime(time.Unix(3000, 0))
	n := &v1.Node{}
	setStatus(n, h, errors.New("network not ready"), t1)
	cond := func(t v1.NodeConditionType) v1.NodeCondition {
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				return c
			}
		}
		return v1.NodeCondition{}
	}
	var types []v1.NodeConditionType
	for _, c := range n.Status.Conditions {
		types = append(types, c.Type)
	}
	if want := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady}; len(types) != 4 || types[0] != want[0] || types[3] != want[3] {
		t.Fatalf("conditions %v, want %v", types, want)
	}
	if c := cond(v1.NodeReady); c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != "network not ready" || !c.LastTransitionTime.Equal(&t1) {
		t.Fatalf("not ready: %+v", c)
	}
	if c := cond(v1.NodeMemoryPressure); c.Status != v1.ConditionFalse || c.Reason != "KubeletHasSufficientMemory" || c.Message != "kubelet has sufficient memory available" {
		t.Fatalf("memory: %+v", c)
	}
	setStatus(n, h, errors.New("still not ready"), t2)
	if c := cond(v1.NodeReady); !c.LastTransitionTime.Equal(&t1) || !c.LastHeartbeatTime.Equal(&t2) || c.Message != "still not ready" {
		t.Fatalf("same status: transition must stay, heartbeat move: %+v", c)
	}
	h.memAvail, h.fsAvail = 50<<20, 5<<30
	setStatus(n, h, nil, t3)
	if c := cond(v1.NodeReady); c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" || c.Message != "kubelet is posting ready status" || !c.LastTransitionTime.Equal(&t3) {
		t.Fatalf("ready: %+v", c)
	}
	if c := cond(v1.NodeMemoryPressure); c.Status != v1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" || !c.LastTransitionTime.Equal(&t3) {
		t.Fatalf("memory pressure: %+v", c)
	}
	if c := cond(v1.NodeDiskPressure); c.Status != v1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" {
		t.Fatalf("disk pressure: %+v", c)
	}
	mem := n.Status.Allocatable[v1.ResourceMemory]
	if mem.Value() != 4<<30-100<<20 {
		t.Fatalf("allocatable memory %s", mem.String())
	}
	eph := n.Status.Allocatable[v1.ResourceEphemeralStorage]
	if eph.Value() != 90<<30 {
		t.Fatalf("allocatable ephemeral-storage %s", eph.String())
	}
}
