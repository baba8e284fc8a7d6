package cri

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// fakeImages is an in-memory image store; "registry" holds what Pull can fetch.
type fakeImages struct {
	mu       sync.Mutex
	registry map[string]Image
	images   []Image
	mounted  map[string]bool // container dir → mounted
	lastAuth *Auth
}

func newFakeImages() *fakeImages {
	return &fakeImages{registry: map[string]Image{}, mounted: map[string]bool{}}
}

func (f *fakeImages) Pull(_ context.Context, ref string, opts PullOptions) (Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAuth = opts.Auth
	img, ok := f.registry[ref]
	if !ok {
		return Image{}, fmt.Errorf("GET https://registry/v2/%s/manifests: MANIFEST_UNKNOWN: manifest unknown", ref)
	}
	f.images = append(f.images, img)
	return img, nil
}

func (f *fakeImages) Get(ref string) (Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, img := range f.images {
		if img.ID == ref || strings.HasPrefix(img.ID, "sha256:"+ref) {
			return img, nil
		}
		for _, t := range img.RepoTags {
			if t == ref {
				return img, nil
			}
		}
	}
	return Image{}, fmt.Errorf("get %s: %w", ref, ErrImageNotFound)
}

func (f *fakeImages) List() []Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Image(nil), f.images...)
}

func (f *fakeImages) Remove(ref string) error {
	img, err := f.Get(ref)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.images {
		if f.images[i].ID == img.ID {
			f.images = append(f.images[:i], f.images[i+1:]...)
			break
		}
	}
	return nil
}

func (f *fakeImages) Mount(imageID, dir, writableDir string) (string, error) {
	rootfs := filepath.Join(dir, "bundle", "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(writableDir, "upper"), 0o755); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mounted[dir] = true
	return rootfs, nil
}

func (f *fakeImages) Unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mounted, dir)
	return nil
}

func (f *fakeImages) Usage() (uint64, uint64, error) { return 1234, 56, nil }

func (f *fakeImages) mountedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mounted)
}

// fakeProc is a container of fakeContainers.
type fakeProc struct {
	status     RuncStatus
	exitCode   int
	startedAt  time.Time
	finishedAt time.Time
	signals    []syscall.Signal
}

// fakeContainers is an in-memory low-level runtime. Signals in ignore do not stop a container.
type fakeContainers struct {
	mu        sync.Mutex
	procs     map[string]*fakeProc
	ignore    map[syscall.Signal]bool
	startErr  error
	createErr error // Create fails with it (runc create of a command not found)
	creates   int
	deletes   int
	starts    int
	logs      map[string]string // id → log path
	reopened  []string
	states    int        // State calls
	podNS     []string   // "setup ipc=.. pid=..", "stop", "remove" of the pod namespaces
	holder    *PIDHolder // what SetupPodNamespaces gives a pid namespace (nil: none)
}

func newFakeContainers() *fakeContainers {
	return &fakeContainers{procs: map[string]*fakeProc{}, ignore: map[syscall.Signal]bool{}, logs: map[string]string{}}
}

func (f *fakeContainers) Create(_ context.Context, id, bundle, logPath string) error {
	if _, err := os.Stat(filepath.Join(bundle, "config.json")); err != nil {
		return fmt.Errorf("no bundle: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if f.createErr != nil {
		return f.createErr
	}
	if _, ok := f.procs[id]; ok {
		return errors.New("exists")
	}
	f.procs[id] = &fakeProc{status: "created"}
	f.logs[id] = logPath
	return nil
}

func (f *fakeContainers) Start(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.startErr != nil {
		return f.startErr
	}
	p, ok := f.procs[id]
	if !ok || p.status != "created" {
		return fmt.Errorf("start %s: not created", id)
	}
	p.status, p.startedAt = "running", time.Now()
	return nil
}

func (f *fakeContainers) State(_ context.Context, id string) (ContainerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states++
	p, ok := f.procs[id]
	if !ok {
		return ContainerState{}, fmt.Errorf("container %s does not exist", id)
	}
	return ContainerState{Status: p.status, Pid: 42, ExitCode: p.exitCode, StartedAt: p.startedAt, FinishedAt: p.finishedAt}, nil
}

func (f *fakeContainers) Kill(_ context.Context, id string, sig syscall.Signal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.procs[id]
	if !ok {
		return fmt.Errorf("container %s does not exist", id)
	}
	if p.status == "stopped" {
		return errors.New("container not running")
	}
	p.signals = append(p.signals, sig)
	if !f.ignore[sig] {
		p.status, p.exitCode, p.finishedAt = "stopped", 128+int(sig), time.Now()
	}
	return nil
}

func (f *fakeContainers) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes++
	delete(f.procs, id)
	return nil
}

func (f *fakeContainers) Exec(_ context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, int, error) {
	if cmd[0] == "sleep" {
		return nil, nil, -1, fmt.Errorf("exec: %w", context.DeadlineExceeded)
	}
	return []byte(strings.Join(cmd, " ")), []byte("err"), len(cmd), nil
}

func (f *fakeContainers) List(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.procs {
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *fakeContainers) SetupPodNamespaces(dir string, ipc, pid bool) (PodNamespaces, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podNS = append(f.podNS, fmt.Sprintf("setup ipc=%v pid=%v", ipc, pid))
	var ns PodNamespaces
	if ipc {
		ns.IPC, ns.Shm = filepath.Join(dir, "ipc"), filepath.Join(dir, "shm")
	}
	if pid && f.holder != nil {
		h := *f.holder
		ns.PIDHolder = &h
	}
	return ns, nil
}

func (f *fakeContainers) StopPodNamespaces(PodNamespaces) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podNS = append(f.podNS, "stop")
	return nil
}

func (f *fakeContainers) RemovePodNamespaces(PodNamespaces) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podNS = append(f.podNS, "remove")
	return nil
}

func (f *fakeContainers) ReopenLog(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reopened = append(f.reopened, id)
	return nil
}

// exit makes a running container exit with code.
func (f *fakeContainers) exit(id string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.procs[id]
	p.status, p.exitCode, p.finishedAt = "stopped", code, time.Now()
}

func (f *fakeContainers) stateCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.states
}

func (f *fakeContainers) signals(id string) []syscall.Signal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]syscall.Signal(nil), f.procs[id].signals...)
}

// fakeNetwork hands out 10.88.0.<n> and records set-ups and tear-downs.
type fakeNetwork struct {
	mu        sync.Mutex
	cidr      string
	next      int
	pods      map[string]Pod
	teardowns map[string]int
	setupErr  error
}

func newFakeNetwork() *fakeNetwork {
	return &fakeNetwork{pods: map[string]Pod{}, teardowns: map[string]int{}, next: 2}
}

func (f *fakeNetwork) SetPodCIDR(cidr string) error {
	if _, err := netip.ParsePrefix(cidr); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cidr = cidr
	return nil
}

func (f *fakeNetwork) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cidr == "" {
		return errors.New("no pod CIDR yet")
	}
	return nil
}

func (f *fakeNetwork) Setup(_ context.Context, pod Pod) (NetworkResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setupErr != nil {
		return NetworkResult{}, f.setupErr
	}
	f.pods[pod.SandboxID] = pod
	ip := netip.AddrFrom4([4]byte{10, 88, 0, byte(f.next)})
	f.next++
	return NetworkResult{NetNSPath: "/run/netns/" + pod.SandboxID, IPs: []netip.Addr{ip}}, nil
}

func (f *fakeNetwork) Teardown(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, id)
	f.teardowns[id]++
	return nil
}

func (f *fakeNetwork) Status(id string) (NetworkResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pods[id]; !ok {
		return NetworkResult{}, errors.New("no such sandbox")
	}
	return NetworkResult{NetNSPath: "/run/netns/" + id}, nil
}

// fakeSpec records the inputs and returns a minimal spec.
type fakeSpec struct {
	mu     sync.Mutex
	inputs []SpecInput
}

func (f *fakeSpec) spec(in SpecInput) (*specs.Spec, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, in)
	return &specs.Spec{Version: specs.Version, Hostname: in.Hostname, Root: &specs.Root{Path: in.Rootfs},
		Process: &specs.Process{Args: in.Container.GetCommand(), User: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 10}}}, Linux: &specs.Linux{CgroupsPath: in.CgroupsPath}}, nil
}

func (f *fakeSpec) last() SpecInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inputs[len(f.inputs)-1]
}

// env is a server over fakes.
type env struct {
	t      *testing.T
	dir    string
	images *fakeImages
	ctrs   *fakeContainers
	net    *fakeNetwork
	spec   *fakeSpec
	srv    *Server
	cfg    Config
}

var busyboxImage = Image{
	ID: "sha256:" + strings.Repeat("ab", 32), RepoTags: []string{"localhost:5000/busybox:latest"},
	RepoDigests: []string{"localhost:5000/busybox@sha256:" + strings.Repeat("cd", 32)}, Size: 1000,
	Config: ocispec.ImageConfig{User: "1000", StopSignal: "SIGQUIT", Cmd: []string{"sh"}},
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	hostFiles := filepath.Join(dir, "host")
	if err := os.MkdirAll(hostFiles, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(hostFiles, "resolv.conf"), "nameserver 192.0.2.53\n")
	writeFile(t, filepath.Join(hostFiles, "hosts"), "127.0.0.1 localhost host-hosts\n")
	e := &env{t: t, dir: dir, images: newFakeImages(), ctrs: newFakeContainers(), net: newFakeNetwork(), spec: &fakeSpec{}}
	e.images.images = append(e.images.images, busyboxImage)
	e.cfg = Config{
		Dir: filepath.Join(dir, "runtime"), ImageDir: filepath.Join(dir, "runtime", "images"),
		Images: e.images, Containers: e.ctrs, Network: e.net, Spec: e.spec.spec, Version: "v0.0.0-test",
		CgroupRoot: filepath.Join(dir, "cgroup"), HostResolvConf: filepath.Join(hostFiles, "resolv.conf"),
		HostHosts: filepath.Join(hostFiles, "hosts"), ProcRoot: filepath.Join(dir, "proc"), SandboxStopGrace: 200 * time.Millisecond, PollInterval: 5 * time.Millisecond,
	}
	e.restart()
	return e
}

// restart replaces the server by a new one on the same directory and fakes.
func (e *env) restart() {
	e.t.Helper()
	srv, err := New(context.Background(), e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
