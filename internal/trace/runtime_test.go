package trace

import (
	"strings"
	"testing"
	"time"
)

func TestRuntimeActors(t *testing.T) {
	if got := Actor("system:kubette-runtime:vm", "kubette/v1 (linux/amd64) kubernetes/x", "", "events.events.k8s.io", "", false); got != "runtime/vm" {
		t.Errorf("Actor of the runtime's client = %q", got)
	}
	if got := EventActor(RuntimeController, "vm"); got != "runtime/vm" {
		t.Errorf("EventActor = %q", got)
	}
}

func TestMergeLabels(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"RunPodSandbox: CNI kubette: bridge+host-local → eth0 10.244.0.7/24 gw 10.244.0.1 in 38ms",
			"RunPodSandbox: CNI kubette: bridge+host-local → eth0 10.244.0.12/24 gw 10.244.0.1 in 52ms",
			"RunPodSandbox: CNI kubette: bridge+host-local → eth0 10.244.0.…/24 gw 10.244.0.1 in 38ms–52ms"},
		{"RunPodSandbox: CNI kubette: bridge+host-local → eth0 10.244.0.…/24 gw 10.244.0.1 in 38ms–52ms",
			"RunPodSandbox: CNI kubette: bridge+host-local → eth0 10.244.0.9/24 gw 10.244.0.1 in 1.2ms",
			"RunPodSandbox: CNI kubette: bridge+host-local → eth0 10.244.0.…/24 gw 10.244.0.1 in 1.2ms–52ms"},
		{"StartContainer: runc start server: pid 4242 in 12ms", "StartContainer: runc start server: pid 4301 in 12ms",
			"StartContainer: runc start server: pid … in 12ms"},
		{"a b", "a b c", "a b"},
	} {
		if got := mergeLabels(c.a, c.b); got != c.want {
			t.Errorf("mergeLabels(%q, %q)\n = %q\nwant %q", c.a, c.b, got, c.want)
		}
	}
}

// TestRuntimeCalls draws the runtime's Events of three sibling pods as the kubelet's calls
// to the runtime, at the steps' own times, folded unless All.
func TestRuntimeCalls(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pod := func(n string) ObjectRef { return ObjectRef{Resource: "pods", Namespace: "default", Name: "web-" + n} }
	in := Input{Objects: []Object{
		{Ref: ObjectRef{Resource: "replicasets.apps", Namespace: "default", Name: "web"}, Kind: "ReplicaSet", UID: "rs"},
		{Ref: pod("a"), Kind: "Pod", UID: "a", Owner: "rs"},
		{Ref: pod("b"), Kind: "Pod", UID: "b", Owner: "rs"},
		{Ref: pod("c"), Kind: "Pod", UID: "c", Owner: "rs"},
	}}
	rt := func(ms int, p, action, reason, msg string) Event {
		return Event{Time: at(ms), Component: "runtime/vm", Action: action, Reason: reason, Message: msg, Object: pod(p), Name: "web-" + p + "." + reason, AtEventTime: true}
	}
	for i, p := range []string{"a", "b", "c"} {
		ip := []string{"7", "8", "12"}[i]
		in.Events = append(in.Events,
			rt(10+i, p, "RunPodSandbox", "NetworkReady", "CNI kubette: bridge+host-local → eth0 10.244.0."+ip+"/24 gw 10.244.0.1 in 3"+ip+"ms"),
			// runc create is StartContainer's (CreateContainer only prepares the bundle), after
			// the kubelet's Created.
			Event{Time: at(20 + i), Component: "kubelet/vm", Reason: "Created", Message: "Created container: server", Object: pod(p), Name: "web-" + p + ".created"},
			rt(30+i, p, "StartContainer", "RuncCreated", "runc create server in 4"+ip+"ms"),
			rt(40+i, p, "StartContainer", "RuncStarted", "runc start server: pid 10"+ip+" in 1"+ip+"ms"),
		)
	}
	// The Event of a runtime step arrived at the API server after the kubelet's own: the
	// step's time places it.
	in.Records = append(in.Records, Record{Seq: 1, Time: at(100), Type: TypeRequest, User: "system:kubette-runtime:vm", Verb: "create", Method: "POST",
		Path: "/apis/events.k8s.io/v1/namespaces/default/events", Resource: "events.events.k8s.io", Namespace: "default", Name: "web-a.NetworkReady", Code: 201})

	text := Text(Build(in, Options{}))
	for _, want := range []string{
		"kubelet/vm → runtime/vm: RunPodSandbox web-…: CNI kubette: bridge+host-local → eth0 10.244.0.…/24 gw 10.244.0.1 in 37ms–312ms ×3 pods",
		"[kubelet/vm] Created: Created container: server ×3 pods",
		"kubelet/vm → runtime/vm: StartContainer web-…: runc create server in 47ms–412ms ×3 pods",
		"kubelet/vm → runtime/vm: StartContainer web-…: runc start server: pid … in 17ms–112ms ×3 pods",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("folded timeline lacks %q:\n%s", want, text)
		}
	}
	if i, j, k := strings.Index(text, "Created:"), strings.Index(text, "runc create"), strings.Index(text, "runc start"); i > j || j > k {
		t.Errorf("the folded timeline is not Created, runc create, runc start:\n%s", text)
	}
	if i, j := strings.Index(text, "RunPodSandbox"), strings.Index(text, "Created:"); i < 0 || i > j {
		t.Errorf("the network step is not before the kubelet's Created:\n%s", text)
	}
	all := Text(Build(in, Options{All: true}))
	if n := strings.Count(all, "kubelet/vm → runtime/vm: "); n != 9 {
		t.Errorf("--all has %d runtime calls, want 9:\n%s", n, all)
	}
	if !strings.Contains(all, "  +0.000s  kubelet/vm → runtime/vm: RunPodSandbox web-a: CNI kubette: bridge+host-local → eth0 10.244.0.7/24 gw 10.244.0.1 in 37ms") ||
		!strings.Contains(all, "runtime/vm → API server: POST /apis/events.k8s.io/v1/namespaces/default/events → 201") {
		t.Errorf("--all lacks the first pod's network step at its own time or the runtime's Event create:\n%s", all)
	}
	f := Build(in, Options{})
	if len(f.Participants) != 2 || f.Participants[0] != "kubelet/vm" || f.Participants[1] != "runtime/vm" {
		t.Errorf("participants %v, want kubelet/vm then runtime/vm", f.Participants)
	}
	if err := CheckMermaid(Mermaid(f)); err != nil {
		t.Errorf("Mermaid: %v\n%s", err, Mermaid(f))
	}
}
