package cri

import (
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRuntimeHandlers runs sandboxes with the default handler and a configured one (kept
// across a restart and reported in the sandbox's status and the list), refuses an unknown
// one with containerd's message, and reports the handlers in Status.
func TestRuntimeHandlers(t *testing.T) {
	e := newEnv(t)
	e.cfg.Handlers = []string{"runc"}
	e.restart()
	run := func(name, handler string) (string, error) {
		cfg := sandboxConfig(name, nil)
		cfg.LogDirectory = filepath.Join(e.dir, "logs", name)
		resp, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
		return resp.GetPodSandboxId(), err
	}
	def, err := run("default", "")
	if err != nil {
		t.Fatal(err)
	}
	named, err := run("named", "runc")
	if err != nil {
		t.Fatal(err)
	}
	_, err = run("unknown", "test-handler")
	if status.Code(err) != codes.Unknown || status.Convert(err).Message() != `failed to get sandbox runtime: no runtime for "test-handler" is configured` {
		t.Fatalf("unknown handler: %v", err)
	}
	e.restart()
	for id, want := range map[string]string{def: "", named: "runc"} {
		st, err := e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		if err != nil || st.GetStatus().GetRuntimeHandler() != want {
			t.Fatalf("status of %s: handler %q, %v; want %q", id, st.GetStatus().GetRuntimeHandler(), err, want)
		}
	}
	list, err := e.srv.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v, %v", list, err)
	}
	for _, sb := range list.Items {
		if (sb.Id == named) != (sb.RuntimeHandler == "runc") {
			t.Fatalf("listed %s with handler %q", sb.Id, sb.RuntimeHandler)
		}
	}
	st, err := e.srv.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range st.GetRuntimeHandlers() {
		names = append(names, h.GetName())
	}
	if len(names) != 2 || names[0] != "" || names[1] != "runc" {
		t.Fatalf("handlers %q", names)
	}
}
