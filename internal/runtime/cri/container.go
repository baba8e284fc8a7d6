package cri

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/runc"
	"github.com/kubette/kubette/internal/runtime/steps"
)

// observed is a container's state as the server reports it.
type observed struct {
	state                 runtimeapi.ContainerState
	startedAt, finishedAt int64
	exitCode              int32
	reason, message       string
	pid                   int // 0 unless created or running
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// refresh asks the low-level runtime for c's state; once c stopped, its final status is
// cached in meta.json. While the init process that the runtime last reported running is
// alive (same pid, same start time, not a zombie), c is running without asking the runtime
// again: the kubelet relists every second, and `runc state` is a process per container.
func (s *Server) refresh(ctx context.Context, c *container) observed {
	s.mu.Lock()
	final, id, live := c.meta.Final, c.meta.ID, c.live
	unborn := !c.meta.Started || c.starting
	s.mu.Unlock()
	if final != nil {
		return observedFinal(final)
	}
	if unborn {
		// CreateContainer only prepares the bundle: the low-level runtime knows the container
		// once StartContainer has created it (runc create), and StartContainer holds it
		// CREATED while it does.
		return observed{state: runtimeapi.ContainerState_CONTAINER_CREATED}
	}
	if live.pid > 0 {
		if start, ok := procStart(s.cfg.ProcRoot, live.pid); ok && start == live.start {
			return observed{state: runtimeapi.ContainerState_CONTAINER_RUNNING, startedAt: live.startedAt, pid: live.pid}
		}
	}
	st, err := s.cfg.Containers.State(ctx, id)
	if err != nil {
		return observed{state: runtimeapi.ContainerState_CONTAINER_UNKNOWN, reason: "Unknown", message: err.Error()}
	}
	switch st.Status {
	case "created":
		return observed{state: runtimeapi.ContainerState_CONTAINER_CREATED, pid: st.Pid}
	case "running":
		o := observed{state: runtimeapi.ContainerState_CONTAINER_RUNNING, startedAt: unixNano(st.StartedAt), pid: st.Pid}
		if start, ok := procStart(s.cfg.ProcRoot, st.Pid); ok && st.Pid > 0 {
			s.mu.Lock()
			c.live = liveInit{pid: st.Pid, start: start, startedAt: o.startedAt}
			s.mu.Unlock()
		}
		return o
	case "stopped":
		f := &finalStatus{
			ExitCode: int32(st.ExitCode), StartedAt: unixNano(st.StartedAt), FinishedAt: unixNano(st.FinishedAt),
			Reason: st.Reason, Message: st.Message,
		}
		if f.FinishedAt == 0 {
			f.FinishedAt = time.Now().UnixNano()
		}
		if f.Reason == "" {
			switch {
			case st.OOMKilled:
				f.Reason = "OOMKilled"
			case st.ExitCode == 0:
				f.Reason = "Completed"
			default:
				f.Reason = "Error"
			}
		}
		return observedFinal(s.setFinal(c, f))
	default:
		return observed{state: runtimeapi.ContainerState_CONTAINER_UNKNOWN, reason: "Unknown",
			message: fmt.Sprintf("runtime reports status %q", st.Status)}
	}
}

// procStart returns the start time (field 22 of /proc/<pid>/stat) of a live, non-zombie
// process.
func procStart(procRoot string, pid int) (string, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces and parentheses: split after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[19] is field 22 (starttime).
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", false
	}
	return f[19], true
}

// setFinal records how c ended unless that is already known, and returns what is recorded.
func (s *Server) setFinal(c *container, f *finalStatus) *finalStatus {
	s.mu.Lock()
	if c.meta.Final != nil {
		f = c.meta.Final
		s.mu.Unlock()
		return f
	}
	c.meta.Final = f
	id := c.meta.ID
	s.mu.Unlock()
	if err := s.persistContainer(c); err != nil {
		s.log.Warn("cannot record a container's exit", "id", id, "err", err)
	}
	return f
}

func observedFinal(f *finalStatus) observed {
	return observed{state: runtimeapi.ContainerState_CONTAINER_EXITED, startedAt: f.StartedAt, finishedAt: f.FinishedAt,
		exitCode: f.ExitCode, reason: f.Reason, message: f.Message}
}

// CreateContainer mounts the image's rootfs, writes the OCI bundle and records the container,
// CREATED. As containerd's CRI plugin, it does not create it in the low-level runtime:
// StartContainer does (runc create), so that a process runc cannot start (a command not
// found) fails StartContainer and ends the container as StartError.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (_ *runtimeapi.CreateContainerResponse, retErr error) {
	cfg, sbCfg := req.GetConfig(), req.GetSandboxConfig()
	if cfg.GetMetadata() == nil || cfg.GetImage().GetImage() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config needs metadata and an image")
	}
	sb, err := s.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	sbMeta := sb.meta
	err = s.checkContainerName(sbMeta.ID, cfg.GetMetadata())
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !sbMeta.Ready {
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %s is not ready", sbMeta.ID)
	}
	if sbCfg == nil {
		sbCfg = sb.cfg
	}
	img, err := s.cfg.Images.Get(cfg.GetImage().GetImage())
	if errors.Is(err, ErrImageNotFound) {
		return nil, status.Errorf(codes.NotFound, "image %q not found", cfg.GetImage().GetImage())
	}
	if err != nil {
		return nil, fmt.Errorf("failed to resolve image %q: %w", cfg.GetImage().GetImage(), err)
	}

	id := newID()
	dir := s.containerDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create container directory %q: %w", dir, err)
	}
	var undo []func(context.Context) error
	defer func() {
		if retErr == nil {
			return
		}
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		var errs []error
		for _, f := range slices.Backward(undo) {
			errs = append(errs, f(cctx))
		}
		errs = append(errs, os.RemoveAll(dir), os.RemoveAll(s.writableDir(id)))
		if err := errors.Join(errs...); err != nil {
			s.log.Warn("cleanup after a failed CreateContainer", "id", id, "err", err)
		}
	}()
	rootfs, err := s.cfg.Images.Mount(img.ID, dir, s.writableDir(id))
	if err != nil {
		return nil, fmt.Errorf("failed to mount image %q for container %s: %w", img.ID, id, err)
	}
	undo = append(undo, func(context.Context) error { return s.cfg.Images.Unmount(dir) })

	cgroupParent := sbCfg.GetLinux().GetCgroupParent()
	if cgroupParent == "" {
		cgroupParent = defaultCgroupParent(sbMeta.ID)
	}
	in := SpecInput{
		Container: cfg, Sandbox: sbCfg, Image: img.Config, Rootfs: rootfs,
		NetNSPath: sbMeta.NetNSPath, Hostname: sbMeta.Hostname,
		CgroupsPath:    filepath.Join(cgroupParent, id),
		MaxOOMScoreAdj: s.oomAdj,
	}
	if nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(); nsOpts.GetPid() == runtimeapi.NamespaceMode_TARGET {
		if in.TargetPIDNamespace, err = s.targetPIDNamespace(ctx, sbMeta.ID, nsOpts.GetTargetId()); err != nil {
			return nil, err
		}
	}
	if h := sbMeta.PodNS.PIDHolder; h != nil && cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_POD {
		if !h.Alive() {
			return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s: the holder of the pod's pid namespace has exited", sbMeta.ID)
		}
		in.PodPIDNamespace = h.Namespace()
	}
	in.IPCNamespace = sbMeta.PodNS.IPC
	sbDir := s.sandboxDir(sbMeta.ID)
	in.SandboxFiles.Shm = sbMeta.PodNS.Shm
	in.SandboxFiles.Hostname = filepath.Join(sbDir, "hostname")
	in.SandboxFiles.Hosts = filepath.Join(sbDir, "hosts")
	in.SandboxFiles.ResolvConf = filepath.Join(sbDir, "resolv.conf")
	spec, err := s.cfg.Spec(in)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to generate the OCI spec of container %q: %v", cfg.GetMetadata().GetName(), err)
	}
	if cfg.GetStdin() {
		// The shim gives the container a stdin pipe that attach sessions write to.
		if spec.Annotations == nil {
			spec.Annotations = map[string]string{}
		}
		spec.Annotations[runc.AnnotationStdin] = "true"
		if cfg.GetStdinOnce() {
			spec.Annotations[runc.AnnotationStdinOnce] = "true"
		}
	}
	bundle := filepath.Join(dir, "bundle")
	if err := writeSpec(filepath.Join(bundle, "config.json"), spec); err != nil {
		return nil, err
	}

	logPath := ""
	if sbCfg.GetLogDirectory() != "" && cfg.GetLogPath() != "" {
		logPath = filepath.Join(sbCfg.GetLogDirectory(), cfg.GetLogPath())
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
			return nil, fmt.Errorf("failed to create the log directory of container %s: %w", id, err)
		}
	}
	stopSignal := img.Config.StopSignal
	if cfg.GetStopSignal() != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		stopSignal = strings.TrimPrefix(cfg.GetStopSignal().String(), "SIGNAL_")
	}
	raw, err := marshalConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode container config: %w", err)
	}
	imageName := cfg.GetImage().GetImage()
	if len(img.RepoTags) > 0 {
		imageName = img.RepoTags[0]
	}
	imageRef := img.ID
	if len(img.RepoDigests) > 0 {
		imageRef = img.RepoDigests[0]
	}
	c := &container{cfg: proto.CloneOf(cfg), meta: containerMeta{
		ID: id, SandboxID: sbMeta.ID, Config: raw, ImageID: img.ID, ImageName: imageName, ImageRef: imageRef,
		StopSignal: stopSignal, CgroupsPath: in.CgroupsPath, CreatedAt: time.Now().UnixNano(), LogPath: logPath,
	}}
	if spec.Process != nil {
		u := spec.Process.User
		c.meta.User = processUser{UID: u.UID, GID: u.GID, Gids: u.AdditionalGids}
	}
	if err := s.saveContainer(c.meta); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if cur, ok := s.sandboxes[sbMeta.ID]; !ok || !cur.meta.Ready {
		// The sandbox was stopped or removed while the container was being created.
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %s stopped while container %q was created", sbMeta.ID, cfg.GetMetadata().GetName())
	}
	if err := s.checkContainerName(sbMeta.ID, cfg.GetMetadata()); err != nil {
		// A concurrent CreateContainer of the same name won.
		s.mu.Unlock()
		return nil, err
	}
	s.ctrs[id] = c
	s.mu.Unlock()
	s.log.Info("container created", "id", id, "name", cfg.GetMetadata().GetName(), "sandbox", sbMeta.ID)
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// checkContainerName fails with AlreadyExists when the sandbox has a container of this name
// and attempt; the caller holds s.mu.
func (s *Server) checkContainerName(sandboxID string, md *runtimeapi.ContainerMetadata) error {
	for _, c := range s.ctrs {
		if c.meta.SandboxID == sandboxID && c.cfg.GetMetadata().GetName() == md.GetName() && c.cfg.GetMetadata().GetAttempt() == md.GetAttempt() {
			return status.Errorf(codes.AlreadyExists, "container %q attempt %d already exists in pod sandbox %s as %s",
				md.GetName(), md.GetAttempt(), sandboxID, c.meta.ID)
		}
	}
	return nil
}

// targetPIDNamespace is the pid namespace of the running container targetID of
// sandbox sandboxID, for a container that shares it (pid NamespaceMode TARGET,
// as kubectl debug --target asks for an ephemeral container).
func (s *Server) targetPIDNamespace(ctx context.Context, sandboxID, targetID string) (string, error) {
	for _, c := range s.containersOf(sandboxID) {
		s.mu.Lock()
		id := c.meta.ID
		s.mu.Unlock()
		if id != targetID {
			continue
		}
		o := s.refresh(ctx, c)
		if o.state != runtimeapi.ContainerState_CONTAINER_RUNNING || o.pid <= 0 {
			return "", status.Errorf(codes.FailedPrecondition, "target container %s of pid namespace TARGET is not running", targetID)
		}
		return fmt.Sprintf("/proc/%d/ns/pid", o.pid), nil
	}
	return "", status.Errorf(codes.NotFound, "target container %q of pid namespace TARGET not found in pod sandbox %s", targetID, sandboxID)
}

// writeSpec writes the bundle's config.json, compact: runc, the shim and exec parse it, nobody
// edits it (about 40 % fewer bytes than indented).
func writeSpec(path string, spec *specs.Spec) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create bundle: %w", err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode OCI spec: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write OCI spec: %w", err)
	}
	return nil
}

// The status of a container that StartContainer could not start, as containerd's CRI plugin
// (and Docker) report it.
const (
	startErrorReason   = "StartError"
	startErrorExitCode = 128
)

// StartContainer creates a created container in the low-level runtime (the shim and `runc
// create`) and starts it. When either fails, the container ends EXITED with exit code 128,
// reason StartError and the runtime's message, and the error is returned.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c.op.Lock()
	defer c.op.Unlock()
	// A container never started and not known to have ended is CREATED: the low-level runtime
	// does not know it yet.
	s.mu.Lock()
	fresh := !c.meta.Started && c.meta.Final == nil
	s.mu.Unlock()
	if !fresh {
		o := s.refresh(ctx, c)
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is %s, not created", c.meta.ID, o.state)
	}
	s.mu.Lock()
	c.meta.Started, c.starting = true, true
	m := c.meta
	sb, ok := s.sandboxes[m.SandboxID]
	ready := ok && sb.meta.Ready
	s.mu.Unlock()
	if err := s.persistContainer(c); err != nil {
		s.mu.Lock()
		c.meta.Started, c.starting = false, false
		s.mu.Unlock()
		return nil, err
	}
	if !ready {
		s.mu.Lock()
		c.starting = false
		s.mu.Unlock()
		return nil, s.startFailed(c, fmt.Errorf("pod sandbox %s is not ready", m.SandboxID))
	}
	runtimeLog := m.LogPath
	if runtimeLog == "" {
		runtimeLog = os.DevNull // the kubelet asked for no log: the output goes nowhere
	}
	runcStart := time.Now()
	err = s.cfg.Containers.Create(ctx, m.ID, filepath.Join(s.containerDir(m.ID), "bundle"), runtimeLog)
	s.mu.Lock()
	c.starting = false
	s.mu.Unlock()
	if err != nil {
		// Whatever runc may have left of it goes now; RemoveContainer deletes again.
		cctx, cancel := cleanupContext(ctx)
		if derr := s.cfg.Containers.Delete(cctx, m.ID); derr != nil {
			s.log.Warn("cleanup after a failed runc create", "id", m.ID, "err", derr)
		}
		cancel()
		return nil, s.startFailed(c, err)
	}
	s.noteContainer(steps.ContainerCreated, c, runcStart, nil)
	runcStart = time.Now()
	if err := s.cfg.Containers.Start(ctx, m.ID); err != nil {
		return nil, s.startFailed(c, err)
	}
	s.noteContainer(steps.ContainerStarted, c, runcStart, func(st *Step) { st.Pid = s.initPid(ctx, m.ID) })
	return &runtimeapi.StartContainerResponse{}, nil
}

// startFailed ends c, which StartContainer could not start because of cause, as StartError
// and returns StartContainer's error.
func (s *Server) startFailed(c *container, cause error) error {
	now := time.Now().UnixNano()
	s.setFinal(c, &finalStatus{ExitCode: startErrorExitCode, StartedAt: now, FinishedAt: now, Reason: startErrorReason, Message: cause.Error()})
	return fmt.Errorf("failed to start container %s: %w", c.meta.ID, cause)
}

// unborn tells whether c is CREATED and not yet created in the low-level runtime.
func (s *Server) unborn(c *container) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !c.meta.Started && c.meta.Final == nil
}

// updateBundleResources sets in the OCI spec at path the cgroup limits that `runc update`
// would set (updateArgs), for a container that runc does not know yet.
func updateBundleResources(path string, r *runtimeapi.LinuxContainerResources) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read OCI spec: %w", err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("decode OCI spec %s: %w", path, err)
	}
	if spec.Linux == nil {
		spec.Linux = &specs.Linux{}
	}
	if spec.Linux.Resources == nil {
		spec.Linux.Resources = &specs.LinuxResources{}
	}
	res := spec.Linux.Resources
	u64 := func(v int64) *uint64 { u := uint64(v); return &u }
	i64 := func(v int64) *int64 { return &v }
	if r.GetCpuPeriod() > 0 || r.GetCpuQuota() > 0 || r.GetCpuShares() > 0 || r.GetCpusetCpus() != "" || r.GetCpusetMems() != "" {
		if res.CPU == nil {
			res.CPU = &specs.LinuxCPU{}
		}
		if v := r.GetCpuPeriod(); v > 0 {
			res.CPU.Period = u64(v)
		}
		if v := r.GetCpuQuota(); v > 0 {
			res.CPU.Quota = i64(v)
		}
		if v := r.GetCpuShares(); v > 0 {
			res.CPU.Shares = u64(v)
		}
		if v := r.GetCpusetCpus(); v != "" {
			res.CPU.Cpus = v
		}
		if v := r.GetCpusetMems(); v != "" {
			res.CPU.Mems = v
		}
	}
	if v := r.GetMemoryLimitInBytes(); v > 0 {
		if res.Memory == nil {
			res.Memory = &specs.LinuxMemory{}
		}
		// memory+swap at least as large as memory, as updateArgs.
		res.Memory.Limit, res.Memory.Swap = i64(v), i64(max(v, r.GetMemorySwapLimitInBytes()))
	}
	return writeSpec(path, &spec)
}

// parseSignal turns "SIGQUIT", "QUIT" or "3" into a signal; "" is SIGTERM.
func parseSignal(name string) (syscall.Signal, error) {
	if name == "" {
		return syscall.SIGTERM, nil
	}
	if n, err := parseUint(name); err == nil {
		return syscall.Signal(n), nil
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	if sig := unix.SignalNum("SIG" + name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}

func parseUint(s string) (uint64, error) {
	if !isNumber(s) {
		return 0, errors.New("not a number")
	}
	var n uint64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// StopContainer sends the stop signal, then SIGKILL after the timeout, and returns once
// the container stopped.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if err := s.stopContainer(ctx, c, time.Duration(req.GetTimeout())*time.Second); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// stopContainer stops c: the stop signal, then SIGKILL after timeout (at once when 0).
func (s *Server) stopContainer(ctx context.Context, c *container, timeout time.Duration) (err error) {
	c.op.Lock()
	defer c.op.Unlock()
	var signals []string // sent, for Steps
	defer s.noteStopped(c, time.Now(), &signals, &err)
	o := s.refresh(ctx, c)
	if o.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil
	}
	s.mu.Lock()
	id, sigName, started := c.meta.ID, c.meta.StopSignal, c.meta.Started
	s.mu.Unlock()
	if !started {
		// Never started: the low-level runtime does not know it, there is nothing to signal.
		// It ends as a SIGKILL would have ended it (the kubelet waits for a CREATED container
		// to stop as for a running one).
		now := time.Now().UnixNano()
		s.setFinal(c, &finalStatus{ExitCode: 128 + int32(syscall.SIGKILL), FinishedAt: now, Reason: "Error",
			Message: "stopped before it was started"})
		return nil
	}
	if timeout > 0 {
		sig, err := parseSignal(sigName)
		if err != nil {
			s.log.Warn("bad stop signal, using SIGTERM", "id", id, "err", err)
			sig = syscall.SIGTERM
		}
		if err := s.cfg.Containers.Kill(ctx, id, sig); err != nil {
			if s.refresh(ctx, c).state == runtimeapi.ContainerState_CONTAINER_EXITED {
				return nil
			}
			return fmt.Errorf("failed to stop container %s with %v: %w", id, sig, err)
		}
		signals = append(signals, unix.SignalName(sig))
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err = s.waitExited(wctx, c)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := s.cfg.Containers.Kill(ctx, id, syscall.SIGKILL); err != nil {
		if s.refresh(ctx, c).state == runtimeapi.ContainerState_CONTAINER_EXITED {
			return nil
		}
		return fmt.Errorf("failed to kill container %s: %w", id, err)
	}
	signals = append(signals, "SIGKILL")
	if err := s.waitExited(ctx, c); err != nil {
		return fmt.Errorf("wait for container %s to stop: %w", id, err)
	}
	return nil
}

// waitExited polls c's state until it exited or ctx ends.
func (s *Server) waitExited(ctx context.Context, c *container) error {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		if s.refresh(ctx, c).state == runtimeapi.ContainerState_CONTAINER_EXITED {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RemoveContainer removes a container whatever its state; unknown IDs are not an error.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if isNotFound(err) {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.removeContainer(ctx, c); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// removeContainer deletes c from the low-level runtime, unmounts its rootfs and removes its
// directory, its record and its writable layer.
func (s *Server) removeContainer(ctx context.Context, c *container) error {
	c.op.Lock()
	defer c.op.Unlock()
	s.mu.Lock()
	id, started := c.meta.ID, c.meta.Started
	_, present := s.ctrs[id]
	s.mu.Unlock()
	if !present {
		return nil
	}
	if started { // a container never started is not known to the low-level runtime
		runcStart := time.Now()
		if err := s.cfg.Containers.Delete(ctx, id); err != nil {
			return fmt.Errorf("failed to delete container %s: %w", id, err)
		}
		s.noteContainer(steps.ContainerDeleted, c, runcStart, nil)
	}
	dir := s.containerDir(id)
	if err := s.cfg.Images.Unmount(dir); err != nil {
		return fmt.Errorf("failed to unmount the rootfs of container %s: %w", id, err)
	}
	// Forget the record first: a crash between here and RemoveAll leaves a directory
	// without meta.json, which load ignores. saveMu keeps a concurrent exit record from
	// writing meta.json again in between.
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove container %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.ctrs, id)
	s.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("failed to remove the directory of container %s: %w", id, err)
	}
	if err := os.RemoveAll(s.writableDir(id)); err != nil {
		return fmt.Errorf("failed to remove the writable layer of container %s: %w", id, err)
	}
	s.log.Info("container removed", "id", id)
	return nil
}

// containerStatus renders c as CRI's ContainerStatus.
func (s *Server) containerStatus(ctx context.Context, c *container) *runtimeapi.ContainerStatus {
	st, _ := s.containerStatusPid(ctx, c)
	return st
}

// containerStatusPid renders c as CRI's ContainerStatus and returns its init's pid too.
func (s *Server) containerStatusPid(ctx context.Context, c *container) (*runtimeapi.ContainerStatus, int) {
	o := s.refresh(ctx, c)
	s.mu.Lock()
	m, cfg := c.meta, c.cfg
	s.mu.Unlock()
	st := &runtimeapi.ContainerStatus{
		Id: m.ID, Metadata: cfg.GetMetadata(), State: o.state, CreatedAt: m.CreatedAt,
		StartedAt: o.startedAt, FinishedAt: o.finishedAt, ExitCode: o.exitCode,
		Image:    &runtimeapi.ImageSpec{Image: m.ImageName, Annotations: cfg.GetImage().GetAnnotations()},
		ImageRef: m.ImageRef, ImageId: m.ImageID, Reason: o.reason, Message: o.message,
		Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(), Mounts: cfg.GetMounts(), LogPath: m.LogPath,
		Resources: &runtimeapi.ContainerResources{Linux: cfg.GetLinux().GetResources()},
	}
	st.User = &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: int64(m.User.UID), Gid: int64(m.User.GID)}}
	for _, g := range m.User.Gids {
		st.User.Linux.SupplementalGroups = append(st.User.Linux.SupplementalGroups, int64(g))
	}
	if sig, err := parseSignal(m.StopSignal); err == nil {
		if v, ok := runtimeapi.Signal_value["SIGNAL_"+unix.SignalName(sig)]; ok {
			st.StopSignal = runtimeapi.Signal(v)
		}
	}
	return st, o.pid
}

// ContainerStatus reports one container.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	st, pid := s.containerStatusPid(ctx, c)
	resp := &runtimeapi.ContainerStatusResponse{Status: st}
	if req.GetVerbose() {
		resp.Info = s.containerInfo(c, pid)
	}
	return resp, nil
}

// containerInfo is the verbose "info" of ContainerStatus, as containerd's: the sandbox ID,
// the pid, the CRI config and the OCI spec, as JSON.
func (s *Server) containerInfo(c *container, pid int) map[string]string {
	s.mu.Lock()
	m := c.meta
	s.mu.Unlock()
	info := struct {
		SandboxID   string          `json:"sandboxID"`
		Pid         int             `json:"pid"`
		Config      json.RawMessage `json:"config"`
		RuntimeSpec json.RawMessage `json:"runtimeSpec,omitempty"`
	}{SandboxID: m.SandboxID, Pid: pid, Config: m.Config}
	if b, err := os.ReadFile(filepath.Join(s.containerDir(m.ID), "bundle", "config.json")); err == nil && json.Valid(b) {
		info.RuntimeSpec = b
	}
	b, err := json.Marshal(info)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	return map[string]string{"info": string(b)}
}

// ListContainers lists containers matching the filter (ID or ID prefix, state, sandbox ID
// or prefix, labels).
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	resp := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{}}
	for _, c := range s.containerList() {
		s.mu.Lock()
		m, cfg := c.meta, c.cfg
		s.mu.Unlock()
		if !hasPrefix(m.ID, f.GetId()) || !hasPrefix(m.SandboxID, f.GetPodSandboxId()) || !matchLabels(cfg.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		o := s.refresh(ctx, c)
		if f.GetState() != nil && f.GetState().GetState() != o.state {
			continue
		}
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id: m.ID, PodSandboxId: m.SandboxID, Metadata: cfg.GetMetadata(),
			Image:    &runtimeapi.ImageSpec{Image: m.ImageName, Annotations: cfg.GetImage().GetAnnotations()},
			ImageRef: m.ImageRef, ImageId: m.ImageID, State: o.state, CreatedAt: m.CreatedAt,
			Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(),
		})
	}
	return resp, nil
}

// containerList returns the containers sorted by creation time.
func (s *Server) containerList() []*container {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*container, 0, len(s.ctrs))
	for _, c := range s.ctrs {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *container) int {
		if a.meta.CreatedAt != b.meta.CreatedAt {
			return int(a.meta.CreatedAt - b.meta.CreatedAt)
		}
		return compareStrings(a.meta.ID, b.meta.ID)
	})
	return out
}

// ExecSync runs a command in a running container and returns its output and exit code.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: empty command")
	}
	if o := s.refresh(ctx, c); o.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running (%s)", c.meta.ID, o.state)
	}
	stdout, stderr, code, err := s.cfg.Containers.Exec(ctx, c.meta.ID, req.GetCmd(), time.Duration(req.GetTimeout())*time.Second)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, status.Errorf(codes.DeadlineExceeded, "exec %q in container %s: timeout after %ds: %v", req.GetCmd(), c.meta.ID, req.GetTimeout(), err)
		}
		return nil, fmt.Errorf("exec %q in container %s: %w", req.GetCmd(), c.meta.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr, ExitCode: int32(code)}, nil
}

// Exec prepares a streaming exec in a running container and returns the streaming server's
// single-use URL for it, which the kubelet proxies the client's connection to.
func (s *Server) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if s.cfg.Streaming == nil {
		return nil, status.Error(codes.Unimplemented, "kubette runtime: no streaming server: exec is not available")
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: empty command")
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r := proto.CloneOf(req)
	r.ContainerId = c.meta.ID
	return s.cfg.Streaming.GetExec(r)
}

// Attach prepares a streaming attach to a running container's stdio and returns the streaming
// server's single-use URL for it.
func (s *Server) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if s.cfg.Streaming == nil {
		return nil, status.Error(codes.Unimplemented, "kubette runtime: no streaming server: attach is not available")
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r := proto.CloneOf(req)
	r.ContainerId = c.meta.ID
	return s.cfg.Streaming.GetAttach(r)
}

// PortForward prepares forwarding to ports of a ready sandbox's network namespace and returns
// the streaming server's single-use URL for it.
func (s *Server) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if s.cfg.Streaming == nil {
		return nil, status.Error(codes.Unimplemented, "kubette runtime: no streaming server: port forwarding is not available")
	}
	sb, err := s.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	id, ready := sb.meta.ID, sb.meta.Ready
	s.mu.Unlock()
	if !ready {
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %s is not ready", id)
	}
	r := proto.CloneOf(req)
	r.PodSandboxId = id
	return s.cfg.Streaming.GetPortForward(r)
}

// SandboxNetNS returns the network namespace path of a sandbox ("" for host network), for the
// streaming server's port forwarding.
func (s *Server) SandboxNetNS(id string) (string, error) {
	sb, err := s.findSandbox(id)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sb.meta.Ready {
		return "", status.Errorf(codes.FailedPrecondition, "pod sandbox %s is not ready", sb.meta.ID)
	}
	return sb.meta.NetNSPath, nil
}

// runningContainer returns the container with this ID (or unique prefix) if it is running.
func (s *Server) runningContainer(ctx context.Context, id string) (*container, error) {
	c, err := s.findContainer(id)
	if err != nil {
		return nil, err
	}
	if o := s.refresh(ctx, c); o.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running (%s)", c.meta.ID, o.state)
	}
	return c, nil
}

// ReopenContainerLog makes the shim of a running container reopen its log file, after the
// kubelet renamed it to rotate it.
func (s *Server) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if o := s.refresh(ctx, c); o.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running (%s)", c.meta.ID, o.state)
	}
	if err := s.cfg.Containers.ReopenLog(ctx, c.meta.ID); err != nil {
		return nil, fmt.Errorf("failed to reopen the log of container %s: %w", c.meta.ID, err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
