package steps

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var pod = Pod{Namespace: "default", Name: "web-1", UID: "u-1"}

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		step         Step
		reason, want string
	}{
		{Step{Kind: NetworkReady, Network: "kubette", Plugins: []string{"bridge", "host-local"}, Interface: "eth0",
			Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.0.7/24")}, Gateways: []netip.Addr{netip.MustParseAddr("10.244.0.1")}, Took: 38200 * time.Microsecond},
			ReasonNetworkReady, "CNI kubette: bridge+host-local → eth0 10.244.0.7/24 gw 10.244.0.1 in 38ms"},
		{Step{Kind: NetworkReady, Network: "kubette", Plugins: []string{"bridge", "host-local", "portmap"}, Interface: "eth0",
			Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.0.7/24"), netip.MustParsePrefix("fd00::7/64")}, Took: 1234 * time.Microsecond},
			ReasonNetworkReady, "CNI kubette: bridge+host-local+portmap → eth0 10.244.0.7/24,fd00::7/64 in 1.2ms"},
		{Step{Kind: ContainerCreated, Container: "server", Took: 45 * time.Millisecond}, ReasonRuncCreated, "runc create server in 45ms"},
		{Step{Kind: ContainerStarted, Container: "server", Pid: 4242, Took: 12 * time.Millisecond}, ReasonRuncStarted, "runc start server: pid 4242 in 12ms"},
		{Step{Kind: ContainerStarted, Container: "server", Took: 12 * time.Millisecond}, ReasonRuncStarted, "runc start server in 12ms"},
		{Step{Kind: ContainerStopped, Container: "server", Signals: []string{"SIGTERM", "SIGKILL"}, Exited: true, ExitCode: 137, Took: 2013 * time.Millisecond},
			ReasonRuncStopped, "runc kill server SIGTERM, SIGKILL: exited 137 in 2.01s"},
		{Step{Kind: ContainerDeleted, Container: "server", Took: 800 * time.Microsecond}, ReasonRuncDeleted, "runc delete server in 800µs"},
	} {
		if got := c.step.Message(); got != c.want {
			t.Errorf("Message() = %q, want %q", got, c.want)
		}
		if got := c.step.Reason(); got != c.reason {
			t.Errorf("Reason() = %q, want %q", got, c.reason)
		}
	}
}

func TestRecorderSendsEvents(t *testing.T) {
	client := fake.NewClientset()
	r := New(client, "node-1", nil)
	end := time.Date(2026, 11, 30, 6, 0, 0, 123456000, time.UTC)
	r.Record(Step{Kind: NetworkReady, Pod: pod, End: end, Network: "kubette", Plugins: []string{"bridge"}, Interface: "eth0", Took: time.Millisecond})
	r.Record(Step{Kind: ContainerCreated, Pod: pod, End: end.Add(time.Millisecond), Container: "server", Took: time.Millisecond})
	r.Record(Step{Kind: ContainerStarted, Pod: pod, End: end.Add(2 * time.Millisecond), Container: "server", Pid: 7, Took: time.Millisecond})
	r.Record(Step{Kind: ContainerStarted, Container: "crictl"}) // no pod: not reported
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for r.Stats().Sent < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("events not sent: %v", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	list, err := client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("got %d Events, want 3", len(list.Items))
	}
	byReason := map[string]int{}
	for i, e := range list.Items {
		byReason[e.Reason] = i
	}
	e := list.Items[byReason[ReasonNetworkReady]]
	if e.ReportingController != Controller || e.ReportingInstance != "node-1" || e.Type != corev1.EventTypeNormal || e.Action != "RunPodSandbox" ||
		e.Regarding.Kind != "Pod" || e.Regarding.Name != "web-1" || e.Regarding.UID != "u-1" || !e.EventTime.Time.Equal(end) ||
		e.Note != "CNI kubette: bridge → eth0 in 1ms" || e.Name != "web-1.18ecbd381d6c8a00" {
		t.Errorf("NetworkReady Event = %+v", e)
	}
	// runc create is StartContainer's, as containerd's CRI plugin creates the task at start.
	if s := list.Items[byReason[ReasonRuncCreated]]; s.Action != "StartContainer" || s.Note != "runc create server in 1ms" {
		t.Errorf("RuncCreated Event = %+v", s)
	}
	if s := list.Items[byReason[ReasonRuncStarted]]; s.Action != "StartContainer" || s.Note != "runc start server: pid 7 in 1ms" {
		t.Errorf("RuncStarted Event = %+v", s)
	}
}

func TestRecordNeverBlocks(t *testing.T) {
	r := New(fake.NewClientset(), "node-1", nil) // not running: nothing drains the queue
	for range QueueLength + 10 {
		r.Record(Step{Kind: ContainerCreated, Pod: pod, Container: "server"})
	}
	if s := r.Stats(); s.Dropped != 10 {
		t.Errorf("stats %v, want 10 dropped", s)
	}
}

// BenchmarkRecord is what a step costs the CRI call that records it: a non-blocking queue
// send (drained here as Run would, without the API request).
func BenchmarkRecord(b *testing.B) {
	r := New(fake.NewClientset(), "node-1", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range r.queue {
		}
	}()
	s := Step{Kind: ContainerStarted, Pod: pod, Container: "server", Pid: 4242, Took: 12 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		r.Record(s)
	}
	b.StopTimer()
	close(r.queue)
	<-done
}

// BenchmarkEvent is the Recorder's own work per Event before its create request: the
// message and the events.k8s.io object.
func BenchmarkEvent(b *testing.B) {
	r := New(fake.NewClientset(), "node-1", nil)
	s := Step{Kind: NetworkReady, Pod: pod, Network: "kubette", Plugins: []string{"bridge", "host-local"}, Interface: "eth0",
		Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.0.7/24")}, Gateways: []netip.Addr{netip.MustParseAddr("10.244.0.1")}, Took: 38 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Event(s)
	}
}
