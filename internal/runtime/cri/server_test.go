package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var ctx = context.Background()

func sandboxConfig(name string, labels map[string]string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Hostname:     name,
		LogDirectory: "",
		Labels:       labels,
		Annotations:  map[string]string{"a": "b"},
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}},
		PortMappings: []*runtimeapi.PortMapping{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 81}},
	}
}

func containerConfig(name string, labels map[string]string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "localhost:5000/busybox:latest"},
		Command:  []string{"sh", "-c", "echo hi"},
		LogPath:  name + "/0.log",
		Labels:   labels,
		Mounts:   []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/tmp/data"}},
	}
}

func (e *env) runSandbox(name string, labels map[string]string) (string, *runtimeapi.PodSandboxConfig) {
	e.t.Helper()
	cfg := sandboxConfig(name, labels)
	cfg.LogDirectory = filepath.Join(e.dir, "logs", name)
	resp, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		e.t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.PodSandboxId, cfg
}

func (e *env) createContainer(sbID string, sbCfg *runtimeapi.PodSandboxConfig, name string, labels map[string]string) string {
	e.t.Helper()
	resp, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbID, Config: containerConfig(name, labels), SandboxConfig: sbCfg})
	if err != nil {
		e.t.Fatalf("CreateContainer: %v", err)
	}
	return resp.ContainerId
}

func (e *env) status(id string) *runtimeapi.ContainerStatus {
	e.t.Helper()
	resp, err := e.srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		e.t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

func (e *env) start(id string) {
	e.t.Helper()
	if _, err := e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		e.t.Fatalf("StartContainer: %v", err)
	}
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v (code %v), want code %v", err, status.Code(err), code)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVersionStatusAndRuntimeConfig(t *testing.T) {
	e := newEnv(t)
	v, err := e.srv.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "kubette" || v.RuntimeApiVersion != "v1" || v.RuntimeVersion != "v0.0.0-test" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	conds := func() map[string]*runtimeapi.RuntimeCondition {
		st, err := e.srv.Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*runtimeapi.RuntimeCondition{}
		for _, c := range st.Status.Conditions {
			m[c.Type] = c
		}
		return m
	}
	c := conds()
	if !c[runtimeapi.RuntimeReady].Status {
		t.Error("runtime not ready")
	}
	if n := c[runtimeapi.NetworkReady]; n.Status || n.Reason != "NetworkPluginNotReady" || !strings.Contains(n.Message, "no pod CIDR yet") {
		t.Errorf("network condition before the pod CIDR = %v", n)
	}
	if _, err := e.srv.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "not-a-cidr"}}}); err == nil {
		t.Error("bad CIDR accepted")
	}
	if _, err := e.srv.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.88.0.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	if n := conds()[runtimeapi.NetworkReady]; !n.Status || n.Reason != "" {
		t.Errorf("network condition after the pod CIDR = %v", n)
	}
	rc, err := e.srv.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil || rc.Linux.CgroupDriver != runtimeapi.CgroupDriver_CGROUPFS {
		t.Fatalf("RuntimeConfig = %v, %v", rc, err)
	}
}

func TestSandboxLifecycle(t *testing.T) {
	e := newEnv(t)
	id, _ := e.runSandbox("web", map[string]string{"app": "web"})
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("sandbox ID %q is not 64 hex characters", id)
	}
	dir := filepath.Join(e.cfg.Dir, "sandboxes", id)
	if got := readString(t, filepath.Join(dir, "hostname")); got != "web\n" {
		t.Errorf("hostname = %q", got)
	}
	if got := readString(t, filepath.Join(dir, "resolv.conf")); got != "search default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n" {
		t.Errorf("resolv.conf = %q", got)
	}
	hosts := readString(t, filepath.Join(dir, "hosts"))
	if !strings.HasPrefix(hosts, "127.0.0.1\tlocalhost\n") || !strings.HasSuffix(hosts, "10.88.0.2\tweb\n") {
		t.Errorf("hosts = %q", hosts)
	}
	pod := e.net.pods[id]
	if pod.Name != "web" || pod.Namespace != "default" || pod.UID != "uid-web" || len(pod.Ports) != 1 || pod.Ports[0].HostPort != 8080 || pod.Ports[0].Protocol != "TCP" {
		t.Errorf("network saw pod %+v", pod)
	}
	// The same pod and attempt again is refused.
	_, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web", nil)})
	wantCode(t, err, codes.AlreadyExists)

	st, err := e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	s := st.Status
	if s.Id != id || s.State != runtimeapi.PodSandboxState_SANDBOX_READY || s.Network.GetIp() != "10.88.0.2" || s.Metadata.Name != "web" ||
		s.Labels["app"] != "web" || s.Annotations["a"] != "b" || s.CreatedAt == 0 || s.Linux == nil {
		t.Errorf("status = %v", s)
	}
	// A prefix works as an ID.
	if _, err := e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id[:8]}); err != nil {
		t.Errorf("status by prefix: %v", err)
	}

	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if e.net.teardowns[id] == 0 {
		t.Error("no network teardown")
	}
	st, _ = e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || st.Status.Network.GetIp() != "" {
		t.Errorf("status after stop = %v", st.Status)
	}
	for range 2 {
		if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory still there: %v", err)
	}
	_, err = e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound)
	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Errorf("stop of a removed sandbox: %v", err)
	}
}

func TestHostNetworkSandbox(t *testing.T) {
	e := newEnv(t)
	cfg := sandboxConfig("hostnet", nil)
	cfg.DnsConfig = nil
	cfg.Hostname = ""
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
	resp, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.PodSandboxId
	if len(e.net.pods) != 0 {
		t.Error("network set up for a host-network pod")
	}
	dir := filepath.Join(e.cfg.Dir, "sandboxes", id)
	if got := readString(t, filepath.Join(dir, "resolv.conf")); got != "nameserver 192.0.2.53\n" {
		t.Errorf("resolv.conf = %q", got)
	}
	if got := readString(t, filepath.Join(dir, "hosts")); got != "127.0.0.1 localhost host-hosts\n" {
		t.Errorf("hosts = %q", got)
	}
	host, _ := os.Hostname()
	if got := readString(t, filepath.Join(dir, "hostname")); got != host+"\n" {
		t.Errorf("hostname = %q, want the host's", got)
	}
	st, _ := e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if st.Status.Network.GetIp() != "" || st.Status.Linux.Namespaces.Options.Network != runtimeapi.NamespaceMode_NODE {
		t.Errorf("status = %v", st.Status)
	}
	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if e.net.teardowns[id] != 0 {
		t.Error("network torn down for a host-network pod")
	}
}

func TestRunPodSandboxRollsBack(t *testing.T) {
	e := newEnv(t)
	e.net.setupErr = errors.New("CNI ADD failed: no IP left")
	_, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("x", nil)})
	if err == nil || !strings.Contains(err.Error(), "no IP left") {
		t.Fatalf("err = %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(e.cfg.Dir, "sandboxes"))
	if len(ents) != 0 {
		t.Errorf("left %d sandbox directories", len(ents))
	}
	if len(e.net.teardowns) != 1 {
		t.Errorf("teardowns = %v, want one after the failed setup", e.net.teardowns)
	}
	_, err = e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}})
	wantCode(t, err, codes.InvalidArgument)
}

func TestListPodSandboxFilters(t *testing.T) {
	e := newEnv(t)
	a, _ := e.runSandbox("a", map[string]string{"app": "x", "tier": "1"})
	b, _ := e.runSandbox("b", map[string]string{"app": "x"})
	c, _ := e.runSandbox("c", map[string]string{"app": "y"})
	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: c}); err != nil {
		t.Fatal(err)
	}
	list := func(f *runtimeapi.PodSandboxFilter) []string {
		resp, err := e.srv.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range resp.Items {
			ids = append(ids, it.Id)
		}
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	for _, tc := range []struct {
		name string
		f    *runtimeapi.PodSandboxFilter
		want []string
	}{
		{"all", nil, sorted(a, b, c)},
		{"id", &runtimeapi.PodSandboxFilter{Id: b}, []string{b}},
		{"id prefix", &runtimeapi.PodSandboxFilter{Id: a[:10]}, []string{a}},
		{"ready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, sorted(a, b)},
		{"notready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, []string{c}},
		{"labels", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "x"}}, sorted(a, b)},
		{"two labels", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "x", "tier": "1"}}, []string{a}},
		{"no match", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "z"}}, nil},
	} {
		if got := list(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestContainerLifecycle(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)

	cfg := containerConfig("app", nil)
	cfg.Image.Image = "localhost:5000/absent:v1"
	_, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
	wantCode(t, err, codes.NotFound)
	_, err = e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: strings.Repeat("0", 64), Config: containerConfig("app", nil)})
	wantCode(t, err, codes.NotFound)

	id := e.createContainer(sb, sbCfg, "app", map[string]string{"l": "v"})
	if len(id) != 64 {
		t.Fatalf("container ID %q", id)
	}
	_, err = e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("app", nil), SandboxConfig: sbCfg})
	wantCode(t, err, codes.AlreadyExists)

	in := e.spec.last()
	sbDir := filepath.Join(e.cfg.Dir, "sandboxes", sb)
	if in.CgroupsPath != "/kubette/pod-"+sb[:12]+"/"+id || in.NetNSPath != "/run/netns/"+sb || in.Hostname != "pod" ||
		in.Rootfs != filepath.Join(e.cfg.Dir, "containers", id, "bundle", "rootfs") || in.Image.User != "1000" ||
		in.SandboxFiles.Hosts != filepath.Join(sbDir, "hosts") || in.SandboxFiles.ResolvConf != filepath.Join(sbDir, "resolv.conf") ||
		in.SandboxFiles.Hostname != filepath.Join(sbDir, "hostname") || in.Sandbox.GetMetadata().GetName() != "pod" {
		t.Errorf("spec input = %+v", in)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "containers", id, "bundle", "config.json")); err != nil {
		t.Errorf("no config.json: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "writable", id, "upper")); err != nil {
		t.Errorf("no writable layer: %v", err)
	}
	wantLog := filepath.Join(sbCfg.LogDirectory, "app", "0.log")
	if _, err := os.Stat(filepath.Dir(wantLog)); err != nil {
		t.Errorf("log directory not created: %v", err)
	}
	if e.ctrs.creates != 0 {
		t.Errorf("CreateContainer created the container in the low-level runtime (%d creates): StartContainer does", e.ctrs.creates)
	}

	st := e.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.CreatedAt == 0 || st.StartedAt != 0 ||
		st.Image.Image != "localhost:5000/busybox:latest" || st.ImageRef != busyboxImage.RepoDigests[0] || st.ImageId != busyboxImage.ID ||
		st.Labels["l"] != "v" || len(st.Mounts) != 1 || st.LogPath != wantLog || st.Metadata.Name != "app" ||
		st.StopSignal != runtimeapi.Signal_SIGNAL_SIGQUIT {
		t.Errorf("created status = %v", st)
	}

	if u := st.User.GetLinux(); u.GetUid() != 1000 || u.GetGid() != 1000 || !slices.Equal(u.GetSupplementalGroups(), []int64{1000, 10}) {
		t.Errorf("user = %v", st.User)
	}

	e.start(id)
	if got := e.ctrs.logs[id]; got != wantLog {
		t.Errorf("log path = %q, want %q", got, wantLog)
	}
	verbose, err := e.srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		SandboxID   string
		Pid         int
		Config      *struct{ Metadata struct{ Name string } }
		RuntimeSpec *struct{ Hostname string }
	}
	if err := json.Unmarshal([]byte(verbose.Info["info"]), &info); err != nil || info.SandboxID != sb || info.Pid != 42 ||
		info.Config.Metadata.Name != "app" || info.RuntimeSpec.Hostname != "pod" {
		t.Errorf("verbose info %q: %+v, %v", verbose.Info["info"], info, err)
	}
	_, err = e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
	st = e.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt == 0 {
		t.Errorf("running status = %v", st)
	}

	ex, err := e.srv.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"echo", "x"}, Timeout: 5})
	if err != nil || string(ex.Stdout) != "echo x" || string(ex.Stderr) != "err" || ex.ExitCode != 2 {
		t.Errorf("ExecSync = %v, %v", ex, err)
	}
	_, err = e.srv.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sleep", "9"}, Timeout: 1})
	wantCode(t, err, codes.DeadlineExceeded)
	if _, err := e.srv.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil || !slices.Equal(e.ctrs.reopened, []string{id}) {
		t.Errorf("ReopenContainerLog: %v, reopened %v", err, e.ctrs.reopened)
	}

	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if sigs := e.ctrs.signals(id); !slices.Equal(sigs, []syscall.Signal{syscall.SIGQUIT}) {
		t.Errorf("signals = %v, want the image's SIGQUIT", sigs)
	}
	st = e.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 128+3 || st.Reason != "Error" || st.FinishedAt == 0 {
		t.Errorf("exited status = %v", st)
	}
	_, err = e.srv.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = e.srv.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
		t.Errorf("stop of an exited container: %v", err)
	}

	for range 2 {
		if _, err := e.srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "containers", id)); !os.IsNotExist(err) {
		t.Errorf("container directory still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "writable", id)); !os.IsNotExist(err) {
		t.Errorf("writable layer still there: %v", err)
	}
	if n := e.images.mountedCount(); n != 0 {
		t.Errorf("%d rootfs still mounted", n)
	}
	_, err = e.srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound)
}

func TestExitReasons(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	ok := e.createContainer(sb, sbCfg, "ok", nil)
	bad := e.createContainer(sb, sbCfg, "bad", nil)
	e.start(ok)
	e.start(bad)
	e.ctrs.exit(ok, 0)
	e.ctrs.exit(bad, 3)
	if st := e.status(ok); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("exit 0: %v", st)
	}
	if st := e.status(bad); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 3 || st.Reason != "Error" {
		t.Errorf("exit 3: %v", st)
	}
	// The exit is kept once the low-level runtime forgot the container.
	_ = e.ctrs.Delete(ctx, bad)
	if st := e.status(bad); st.ExitCode != 3 || st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("after delete: %v", st)
	}
}

func TestStartError(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	e.ctrs.startErr = errors.New(`exec: "nope": executable file not found in $PATH`)
	_, err := e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Fatalf("err = %v", err)
	}
	st := e.status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" || st.ExitCode != 128 || !strings.Contains(st.Message, "nope") {
		t.Errorf("status = %v", st)
	}
}

// TestCreateFailureIsAStartError: runc create runs in StartContainer; when it fails (a
// command not found) the container ends as containerd's CRI plugin ends it: EXITED, 128,
// StartError with runc's message, and StartContainer returns the error.
func TestCreateFailureIsAStartError(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	e.ctrs.createErr = errors.New(`runc create failed: unable to start container process: exec: "nope": executable file not found in $PATH`)
	id := e.createContainer(sb, sbCfg, "app", nil)
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("after CreateContainer: %v", st)
	}
	deletes := e.ctrs.deletes
	_, err := e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), `exec: "nope": executable file not found`) {
		t.Fatalf("StartContainer: %v", err)
	}
	if e.ctrs.starts != 0 || e.ctrs.deletes != deletes+1 {
		t.Errorf("after a failed create: %d starts, %d deletes, want none and the cleanup's one", e.ctrs.starts, e.ctrs.deletes-deletes)
	}
	check := func(when string) {
		t.Helper()
		st := e.status(id)
		if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" || st.ExitCode != 128 ||
			!strings.Contains(st.Message, `exec: "nope"`) || st.FinishedAt == 0 {
			t.Errorf("%s: status = %v", when, st)
		}
	}
	check("after StartContainer")
	_, err = e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
	e.restart()
	check("after a restart")
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "containers", id)); !os.IsNotExist(err) {
		t.Errorf("container directory still there: %v", err)
	}
}

// TestNeverStartedContainer: a container CreateContainer made is not in the low-level
// runtime: its status, list, stop and removal ask nothing of it, and a restart keeps it
// CREATED and startable.
func TestNeverStartedContainer(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	stopped := e.createContainer(sb, sbCfg, "stopped", nil)
	states := e.ctrs.stateCalls()
	resp, err := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_CREATED}}})
	if err != nil || len(resp.Containers) != 2 {
		t.Fatalf("created containers: %v, %v", resp, err)
	}
	if e.status(id).State != runtimeapi.ContainerState_CONTAINER_CREATED || e.ctrs.stateCalls() != states {
		t.Errorf("status asked the runtime %d times", e.ctrs.stateCalls()-states)
	}
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: stopped, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if st := e.status(stopped); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 || st.FinishedAt == 0 {
		t.Errorf("stopped before a start: %v", st)
	}
	_, err = e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: stopped})
	wantCode(t, err, codes.FailedPrecondition)
	deletes := e.ctrs.deletes
	if _, err := e.srv.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: stopped}); err != nil {
		t.Fatal(err)
	}
	if e.ctrs.deletes != deletes || e.ctrs.creates != 0 {
		t.Errorf("stop and removal of a container never started: %d deletes, %d creates", e.ctrs.deletes-deletes, e.ctrs.creates)
	}

	// up restarts: the created container is still CREATED (what runc may hold of it is
	// deleted: an older kubette created it there) and starts.
	if err := e.ctrs.Create(ctx, id, filepath.Join(e.cfg.Dir, "containers", id, "bundle"), os.DevNull); err != nil {
		t.Fatal(err) // as an older kubette's CreateContainer did
	}
	e.restart()
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Errorf("after a restart: %v", st)
	}
	e.start(id)
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("started after a restart: %v", st)
	}
}

// TestStartInAStoppedSandbox: a created container of a sandbox that was stopped meanwhile does
// not start; it ends as StartError (containerd's check of the sandbox's state).
func TestStartInAStoppedSandbox(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	e.srv.mu.Lock()
	e.srv.sandboxes[sb].meta.Ready = false // as StopPodSandbox between the kubelet's two calls
	e.srv.mu.Unlock()
	_, err := e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), "not ready") || e.ctrs.creates != 0 {
		t.Fatalf("StartContainer: %v (%d creates)", err, e.ctrs.creates)
	}
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" {
		t.Errorf("status = %v", st)
	}
}

func TestStopContainerEscalates(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	stubborn := e.createContainer(sb, sbCfg, "stubborn", nil)
	quick := e.createContainer(sb, sbCfg, "quick", nil)
	e.start(stubborn)
	e.start(quick)
	e.ctrs.ignore[syscall.SIGQUIT] = true
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: stubborn, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if sigs := e.ctrs.signals(stubborn); !slices.Equal(sigs, []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL}) {
		t.Errorf("signals = %v, want SIGQUIT then SIGKILL", sigs)
	}
	if st := e.status(stubborn); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Errorf("status = %v", st)
	}
	if _, err := e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: quick, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	if sigs := e.ctrs.signals(quick); !slices.Equal(sigs, []syscall.Signal{syscall.SIGKILL}) {
		t.Errorf("timeout 0: signals = %v, want SIGKILL only", sigs)
	}
}

func TestStopAndRemoveSandboxStopsContainers(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	other, otherCfg := e.runSandbox("other", nil)
	a := e.createContainer(sb, sbCfg, "a", nil)
	b := e.createContainer(sb, sbCfg, "b", nil)
	c := e.createContainer(other, otherCfg, "c", nil)
	e.start(a)
	e.start(c)
	e.ctrs.ignore[syscall.SIGQUIT] = true // a needs SIGKILL after the short grace
	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("%s after StopPodSandbox: %v", id[:6], st.State)
		}
	}
	if st := e.status(c); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container of another sandbox: %v", st.State)
	}
	// No new containers in a stopped sandbox.
	_, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("late", nil), SandboxConfig: sbCfg})
	wantCode(t, err, codes.FailedPrecondition)
	cgDir := filepath.Join(e.cfg.CgroupRoot, "memory", "kubette", "pod-"+sb[:12])
	writeFile(t, filepath.Join(e.cfg.CgroupRoot, "memory", "kubette", "pod-other", "keep"), "")
	if err := os.MkdirAll(cgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cgDir); !os.IsNotExist(err) {
		t.Errorf("the sandbox's cgroup parent is left: %v", err)
	}
	resp, _ := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if len(resp.Containers) != 1 || resp.Containers[0].Id != c {
		t.Errorf("containers after RemovePodSandbox: %v", resp.Containers)
	}
	// Removing a READY sandbox stops it first.
	if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: other}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); len(resp.Containers) != 0 {
		t.Errorf("containers left: %v", resp.Containers)
	}
	if e.images.mountedCount() != 0 || len(e.ctrs.procs) != 0 || len(e.net.pods) != 0 {
		t.Errorf("left mounts %d, runc containers %d, networks %d", e.images.mountedCount(), len(e.ctrs.procs), len(e.net.pods))
	}
}

func TestListContainersFilters(t *testing.T) {
	e := newEnv(t)
	sb1, cfg1 := e.runSandbox("one", nil)
	sb2, cfg2 := e.runSandbox("two", nil)
	a := e.createContainer(sb1, cfg1, "a", map[string]string{"k": "1"})
	b := e.createContainer(sb1, cfg1, "b", map[string]string{"k": "2"})
	c := e.createContainer(sb2, cfg2, "c", map[string]string{"k": "1"})
	e.start(b)
	e.start(c)
	e.ctrs.exit(c, 0)
	list := func(f *runtimeapi.ContainerFilter) []string {
		resp, err := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range resp.Containers {
			ids = append(ids, it.Id)
		}
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	for _, tc := range []struct {
		name string
		f    *runtimeapi.ContainerFilter
		want []string
	}{
		{"all", nil, sorted(a, b, c)},
		{"id", &runtimeapi.ContainerFilter{Id: a}, []string{a}},
		{"id prefix", &runtimeapi.ContainerFilter{Id: b[:7]}, []string{b}},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb1}, sorted(a, b)},
		{"created", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{a}},
		{"running", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{b}},
		{"exited", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, []string{c}},
		{"labels", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"k": "1"}}, sorted(a, c)},
		{"labels and sandbox", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"k": "1"}, PodSandboxId: sb2}, []string{c}},
	} {
		if got := list(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	resp, _ := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: b}})
	got := resp.Containers[0]
	if got.PodSandboxId != sb1 || got.Metadata.Name != "b" || got.ImageRef != busyboxImage.RepoDigests[0] || got.ImageId != busyboxImage.ID ||
		got.Image.Image != "localhost:5000/busybox:latest" || got.State != runtimeapi.ContainerState_CONTAINER_RUNNING || got.Labels["k"] != "2" {
		t.Errorf("container = %v", got)
	}
}

func TestRestartReloadsAndAdopts(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", map[string]string{"x": "y"})
	running := e.createContainer(sb, sbCfg, "running", nil)
	exits := e.createContainer(sb, sbCfg, "exits", nil)
	created := e.createContainer(sb, sbCfg, "created", nil)
	e.start(running)
	e.start(exits)
	wantStarted := e.status(running).StartedAt
	starts := e.ctrs.starts

	// The server goes away; meanwhile one container exits (its shim wrote exit.json).
	e.ctrs.exit(exits, 7)
	e.restart()

	if st := e.status(running); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt != wantStarted {
		t.Errorf("running container after restart: %v", st)
	}
	if e.ctrs.starts != starts {
		t.Error("a container was started again on restart")
	}
	if st := e.status(exits); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 7 || st.Reason != "Error" {
		t.Errorf("exited container after restart: %v", st)
	}
	if st := e.status(created); st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.Metadata.Name != "created" {
		t.Errorf("created container after restart: %v", st)
	}
	ps, err := e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || ps.Status.Network.Ip != "10.88.0.2" || ps.Status.Labels["x"] != "y" {
		t.Errorf("sandbox after restart: %v, %v", ps, err)
	}
	// The reloaded records still work: stop and remove everything.
	if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if resp, _ := e.srv.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); len(resp.Items) != 0 {
		t.Errorf("sandboxes after removal and restart: %v", resp.Items)
	}
}

func TestRestartMarksVanishedContainersExited(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	e.start(id)
	_ = e.ctrs.Delete(ctx, id) // the low-level runtime lost it
	e.restart()
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "Unknown" {
		t.Errorf("status = %v", st)
	}
}

func TestImages(t *testing.T) {
	e := newEnv(t)
	img := busyboxImage
	img.ID = "sha256:" + strings.Repeat("ef", 32)
	img.RepoTags = []string{"localhost:5000/app:v1"}
	img.Config.User = "nobody"
	e.images.registry["localhost:5000/app:v1"] = img

	resp, err := e.srv.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/app:v1"},
		Auth: &runtimeapi.AuthConfig{Username: "u", Password: "p"}})
	if err != nil || resp.ImageRef != img.ID {
		t.Fatalf("PullImage = %v, %v", resp, err)
	}
	if a := e.images.lastAuth; a == nil || a.Username != "u" || a.Password != "p" {
		t.Errorf("auth = %+v", a)
	}
	_, err = e.srv.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/nope:v1"}})
	if err == nil || !strings.Contains(err.Error(), "MANIFEST_UNKNOWN: manifest unknown") {
		t.Errorf("pull error lost the registry's text: %v", err)
	}

	list, err := e.srv.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.Images) != 2 {
		t.Fatalf("ListImages = %v, %v", list, err)
	}
	list, _ = e.srv.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/app:v1"}}})
	if len(list.Images) != 1 || list.Images[0].Id != img.ID {
		t.Errorf("filtered ListImages = %v", list.Images)
	}

	st, err := e.srv.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/app:v1"}})
	if err != nil || st.Image.Id != img.ID || st.Image.Username != "nobody" || st.Image.Uid != nil || st.Image.Size != img.Size || st.Image.RepoTags[0] != "localhost:5000/app:v1" {
		t.Errorf("ImageStatus = %v, %v", st, err)
	}
	st, _ = e.srv.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/busybox:latest"}})
	if st.Image.Uid.GetValue() != 1000 || st.Image.Username != "" {
		t.Errorf("numeric user: %v", st.Image)
	}
	st, err = e.srv.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/app:v1"}, Verbose: true})
	if err != nil || !strings.Contains(st.Info["info"], `"User":"nobody"`) {
		t.Errorf("verbose ImageStatus info = %q, %v", st.GetInfo(), err)
	}
	st, err = e.srv.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "localhost:5000/absent:v1"}})
	if err != nil || st.Image != nil {
		t.Errorf("absent image: %v, %v", st, err)
	}

	for range 2 {
		if _, err := e.srv.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.ID}}); err != nil {
			t.Fatal(err)
		}
	}
	if list, _ := e.srv.ListImages(ctx, &runtimeapi.ListImagesRequest{}); len(list.Images) != 1 {
		t.Errorf("images after remove: %v", list.Images)
	}

	fs, err := e.srv.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(fs.ImageFilesystems) != 1 || fs.ImageFilesystems[0].UsedBytes.Value != 1234 ||
		fs.ImageFilesystems[0].InodesUsed.Value != 56 || fs.ImageFilesystems[0].FsId.Mountpoint != e.cfg.ImageDir {
		t.Errorf("ImageFsInfo = %v, %v", fs, err)
	}
}

func TestStats(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", map[string]string{"k": "v"})
	other := e.createContainer(sb, sbCfg, "other", nil)
	e.start(id)
	cg := "/kubette/pod-" + sb[:12] + "/" + id
	writeFile(t, filepath.Join(e.cfg.CgroupRoot, "cpuacct", cg, "cpuacct.usage"), "123456789\n")
	writeFile(t, filepath.Join(e.cfg.CgroupRoot, "memory", cg, "memory.usage_in_bytes"), "1000000\n")
	writeFile(t, filepath.Join(e.cfg.CgroupRoot, "memory", cg, "memory.stat"), "cache 5\ntotal_inactive_file 250000\ntotal_rss 600000\n")
	writeFile(t, filepath.Join(e.cfg.Dir, "writable", id, "upper", "tmp", "f"), "12345")

	resp, err := e.srv.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	s := resp.Stats
	if s.Attributes.Id != id || s.Attributes.Labels["k"] != "v" || s.Cpu.UsageCoreNanoSeconds.Value != 123456789 ||
		s.Memory.WorkingSetBytes.Value != 750000 || s.Memory.UsageBytes.Value != 1000000 || s.Memory.RssBytes.Value != 600000 ||
		s.WritableLayer.UsedBytes.Value != 5 || s.WritableLayer.InodesUsed.Value != 3 {
		t.Errorf("stats = %v", s)
	}
	list, err := e.srv.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{"k": "v"}}})
	if err != nil || len(list.Stats) != 1 || list.Stats[0].Attributes.Id != id {
		t.Errorf("ListContainerStats = %v, %v", list, err)
	}
	list, _ = e.srv.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}})
	if len(list.Stats) != 2 {
		t.Errorf("by sandbox: %d stats", len(list.Stats))
	}
	resp, _ = e.srv.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: other})
	if resp.Stats.Cpu != nil || resp.Stats.Memory != nil {
		t.Errorf("stats without cgroup files: %v", resp.Stats)
	}
}

func TestUpdateContainerResources(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	e.start(id)
	res := &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20}
	_, err := e.srv.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: res})
	wantCode(t, err, codes.Unimplemented)

	// A fake runc records its arguments.
	argsFile := filepath.Join(e.dir, "runc-args")
	script := filepath.Join(e.dir, "runc")
	writeFile(t, script, fmt.Sprintf("#!/bin/sh\necho \"$@\" > %s\n", argsFile))
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	e.cfg.Runc, e.cfg.RuncRoot = script, "/run/kubette-runc"
	e.restart()
	if _, err := e.srv.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: res}); err != nil {
		t.Fatal(err)
	}
	want := "--root /run/kubette-runc update --cpu-period 100000 --cpu-quota 50000 --cpu-share 512 --memory 67108864 --memory-swap 67108864 " + id + "\n"
	if got := readString(t, argsFile); got != want {
		t.Errorf("runc args:\n got %q\nwant %q", got, want)
	}
	if got := e.status(id).Resources.Linux.MemoryLimitInBytes; got != 64<<20 {
		t.Errorf("recorded memory limit = %d", got)
	}
	// A container not yet started is not in runc: its bundle gets the limits, for runc create.
	created := e.createContainer(sb, sbCfg, "created", nil)
	_ = os.Remove(argsFile)
	if _, err := e.srv.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: created, Linux: res}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(argsFile); !os.IsNotExist(err) {
		t.Errorf("runc update ran for a container runc does not know: %v", err)
	}
	var spec struct {
		Linux struct {
			Resources struct {
				CPU struct {
					Shares, Period uint64
					Quota          int64
				}
				Memory struct{ Limit, Swap int64 }
			}
		}
	}
	if err := json.Unmarshal([]byte(readString(t, filepath.Join(e.cfg.Dir, "containers", created, "bundle", "config.json"))), &spec); err != nil {
		t.Fatal(err)
	}
	if r := spec.Linux.Resources; r.CPU.Shares != 512 || r.CPU.Quota != 50000 || r.CPU.Period != 100000 || r.Memory.Limit != 64<<20 || r.Memory.Swap != 64<<20 {
		t.Errorf("bundle resources %+v", r)
	}
	e.restart()
	if got := e.status(id).Resources.Linux.CpuShares; got != 512 {
		t.Errorf("recorded cpu shares after restart = %d", got)
	}
}

func TestStreamingIsUnimplemented(t *testing.T) {
	e := newEnv(t)
	_, err := e.srv.Exec(ctx, &runtimeapi.ExecRequest{})
	wantCode(t, err, codes.Unimplemented)
	_, err = e.srv.Attach(ctx, &runtimeapi.AttachRequest{})
	wantCode(t, err, codes.Unimplemented)
	_, err = e.srv.PortForward(ctx, &runtimeapi.PortForwardRequest{})
	wantCode(t, err, codes.Unimplemented)
}

func TestDown(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"a", "b"} {
		sb, cfg := e.runSandbox(name, nil)
		e.start(e.createContainer(sb, cfg, "app", nil))
		e.createContainer(sb, cfg, "idle", nil)
	}
	if err := e.srv.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if e.images.mountedCount() != 0 || len(e.ctrs.procs) != 0 || len(e.net.pods) != 0 {
		t.Errorf("left mounts %d, runc containers %d, networks %d", e.images.mountedCount(), len(e.ctrs.procs), len(e.net.pods))
	}
	for _, d := range []string{"sandboxes", "containers"} {
		if ents, _ := os.ReadDir(filepath.Join(e.cfg.Dir, d)); len(ents) != 0 {
			t.Errorf("%s left: %d", d, len(ents))
		}
	}
}

func TestConcurrentRPCs(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("pod%d", i)
			cfg := sandboxConfig(name, nil)
			r, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err != nil {
				errs <- err
				return
			}
			var ids []string
			for j := range 3 {
				c, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: r.PodSandboxId, Config: containerConfig(fmt.Sprint("c", j), nil), SandboxConfig: cfg})
				if err != nil {
					errs <- err
					return
				}
				ids = append(ids, c.ContainerId)
				if _, err := e.srv.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
					errs <- err
				}
			}
			for _, id := range ids {
				_, _ = e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				_, _ = e.srv.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				_, _ = e.srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
				_, _ = e.srv.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
				wg.Go(func() { _, _ = e.srv.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}) })
			}
			if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: r.PodSandboxId}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if resp, _ := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); len(resp.Containers) != 0 {
		t.Errorf("%d containers left", len(resp.Containers))
	}
}

// TestRestartAfterReboot: a reboot empties the tmpfs of the sandboxes and containers
// directories and runc's state, while the writable layers on disk stay. The restarted server
// knows no sandbox or container and removes the writable layers whose containers are gone;
// one whose container directory is there but unreadable stays.
func TestRestartAfterReboot(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	gone := e.createContainer(sb, sbCfg, "gone", nil)
	e.start(gone)
	unreadable := e.createContainer(sb, sbCfg, "unreadable", nil)
	writeFile(t, filepath.Join(e.cfg.Dir, "writable", gone, "upper", "data"), "written by the container")
	for _, d := range []string{"sandboxes", "containers"} {
		if err := os.RemoveAll(filepath.Join(e.cfg.Dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(e.cfg.Dir, "containers", unreadable, "meta.json"), "{")
	_ = e.ctrs.Delete(ctx, gone)
	_ = e.ctrs.Delete(ctx, unreadable)
	e.restart()
	if resp, err := e.srv.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || len(resp.Containers) != 0 {
		t.Errorf("containers after the reboot: %v, %v", resp, err)
	}
	if resp, err := e.srv.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err != nil || len(resp.Items) != 0 {
		t.Errorf("sandboxes after the reboot: %v, %v", resp, err)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "writable", gone)); !os.IsNotExist(err) {
		t.Errorf("the writable layer of a container gone with the reboot: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "writable", unreadable, "upper")); err != nil {
		t.Errorf("the writable layer of a container whose record is unreadable: %v", err)
	}
}

func TestRestartRemovesLeftovers(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	// A crash in the middle of RemoveContainer: meta.json is gone, the rest is not.
	dir := filepath.Join(e.cfg.Dir, "containers", id)
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil {
		t.Fatal(err)
	}
	// A crash in RunPodSandbox after the network was set up.
	other, _ := e.runSandbox("other", nil)
	sbDir := filepath.Join(e.cfg.Dir, "sandboxes", other)
	if err := os.Remove(filepath.Join(sbDir, "meta.json")); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if _, err := os.Stat(sbDir); !os.IsNotExist(err) {
		t.Errorf("leftover sandbox directory: %v", err)
	}
	if _, ok := e.net.pods[other]; ok {
		t.Error("leftover sandbox network")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("leftover directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.Dir, "writable", id)); !os.IsNotExist(err) {
		t.Errorf("leftover writable layer: %v", err)
	}
	if e.images.mountedCount() != 0 || len(e.ctrs.procs) != 0 {
		t.Errorf("leftover mount or container: %d, %d", e.images.mountedCount(), len(e.ctrs.procs))
	}
	_, err := e.srv.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound)
}

func TestRunningInitIsWatchedWithoutTheRuntime(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	id := e.createContainer(sb, sbCfg, "app", nil)
	// The fake runtime reports pid 42; its /proc entry says it lives (a name with spaces and
	// parentheses, as /proc allows).
	stat := filepath.Join(e.cfg.ProcRoot, "42", "stat")
	writeFile(t, stat, "42 (my (odd) sh) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10\n")
	e.start(id)
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("state = %v", st.State)
	}
	calls := e.ctrs.stateCalls()
	for range 3 {
		if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt == 0 {
			t.Fatalf("status = %v", st)
		}
	}
	if got := e.ctrs.stateCalls(); got != calls {
		t.Errorf("the runtime was asked %d more times while the init lived", got-calls)
	}
	// The init exits: a zombie until the shim reaps it.
	e.ctrs.exit(id, 5)
	writeFile(t, stat, "42 (my (odd) sh) Z 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 0 0\n")
	if st := e.status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 5 {
		t.Errorf("after exit: %v", st)
	}
	// A new process with the same pid is not the container's init.
	id2 := e.createContainer(sb, sbCfg, "app2", nil)
	writeFile(t, stat, "42 (sh) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 111 1000 10\n")
	e.start(id2)
	e.status(id2)
	e.ctrs.exit(id2, 6)
	writeFile(t, stat, "42 (other) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 222 1000 10\n")
	if st := e.status(id2); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 6 {
		t.Errorf("after pid reuse: %v", st)
	}
}

func TestConcurrentSameNameCreatesOnlyOne(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sandboxes, containers int
	for range 6 {
		wg.Go(func() {
			if _, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("twin", nil)}); err == nil {
				mu.Lock()
				sandboxes++
				mu.Unlock()
			} else if status.Code(err) != codes.AlreadyExists {
				t.Errorf("RunPodSandbox: %v", err)
			}
		})
		wg.Go(func() {
			_, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("twin", nil), SandboxConfig: sbCfg})
			if err == nil {
				mu.Lock()
				containers++
				mu.Unlock()
			} else if status.Code(err) != codes.AlreadyExists {
				t.Errorf("CreateContainer: %v", err)
			}
		})
	}
	wg.Wait()
	if sandboxes != 1 || containers != 1 {
		t.Errorf("%d sandboxes and %d containers of the same name, want one each", sandboxes, containers)
	}
	if n := e.images.mountedCount(); n != 1 {
		t.Errorf("%d rootfs mounted, want 1 (the losers roll back)", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.cfg.Dir, "containers")); len(ents) != 1 {
		t.Errorf("%d container directories, want 1", len(ents))
	}
}

func TestRemovePodSandboxRemovesTheKubeletsCgroupParent(t *testing.T) {
	e := newEnv(t)
	run := func(attempt uint32) string {
		cfg := sandboxConfig("pod", nil)
		cfg.Metadata.Attempt = attempt
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/kubette/poduid-pod"}
		r, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return r.PodSandboxId
	}
	old, cur := run(0), run(1)
	cg := filepath.Join(e.cfg.CgroupRoot, "memory", "kubette", "poduid-pod")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(e.cfg.CgroupRoot, "memory", "kubepods", "podx")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg); err != nil {
		t.Errorf("the cgroup parent another attempt shares was removed: %v", err)
	}
	if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: cur}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("the cgroup parent is left: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("a cgroup outside /kubette/ was touched: %v", err)
	}
}

func TestTargetPIDNamespace(t *testing.T) {
	e := newEnv(t)
	sb, sbCfg := e.runSandbox("pod", nil)
	target := e.createContainer(sb, sbCfg, "app", nil)
	debug := func() error {
		cfg := containerConfig("debugger", nil)
		cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: target},
		}}
		_, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
		return err
	}
	// Created but not started: there is no process whose namespace to join.
	wantCode(t, debug(), codes.FailedPrecondition)
	e.start(target)
	if err := debug(); err != nil {
		t.Fatalf("CreateContainer with a running target: %v", err)
	}
	if got := e.spec.last().TargetPIDNamespace; got != "/proc/42/ns/pid" {
		t.Errorf("TargetPIDNamespace = %q, want the target's init pid namespace /proc/42/ns/pid", got)
	}
	// A target in another sandbox is not found.
	sb2, sbCfg2 := e.runSandbox("other", nil)
	cfg := containerConfig("debugger", nil)
	cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: target},
	}}
	_, err := e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb2, Config: cfg, SandboxConfig: sbCfg2})
	wantCode(t, err, codes.NotFound)
}
