package runc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// PIDHolder is the process that holds a pod's shared pid namespace (shareProcessNamespace):
// the shim binary in its -pause mode, started in a new pid namespace of which it is init, as
// the pause container is under containerd. The pod's containers join that namespace; when
// the holder ends, the kernel kills whatever is left in it.
type PIDHolder struct {
	Pid   int    `json:"pid"`
	Start string `json:"start"` // /proc/<pid>/stat starttime, which tells a reused pid apart
}

// Namespace is the path of the holder's pid namespace, for a container's spec.
func (h PIDHolder) Namespace() string { return "/proc/" + strconv.Itoa(h.Pid) + "/ns/pid" }

// Alive reports whether the holder is still the live process it was.
func (h PIDHolder) Alive() bool {
	start, alive := procStartTime(h.Pid)
	return alive && h.Pid > 0 && start == h.Start
}

// StartPIDHolder starts the holder of a new pid namespace for the sandbox whose directory is
// sandboxDir (named in its arguments, so that `kubette down` finds holders whose records are
// gone). It is this process's child until it ends (reaped as the shims are) or this process
// does (then init's, as the shims).
func (r *Runtime) StartPIDHolder(sandboxDir string) (PIDHolder, error) {
	cmd := exec.Command(r.shim[0], append(append([]string(nil), r.shim[1:]...), pauseFlag, "-sandbox", sandboxDir)...)
	cmd.Env = append(shimEnviron(os.Environ()), ShimEnv+"=1")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		return PIDHolder{}, fmt.Errorf("start the pod's pid namespace holder: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	r.mu.Lock()
	r.shims[pid] = struct{}{}
	r.mu.Unlock()
	start, alive := procStartTime(pid)
	if !alive {
		r.reapShims()
		return PIDHolder{}, errors.New("start the pod's pid namespace holder: it exited at once")
	}
	return PIDHolder{Pid: pid, Start: start}, nil
}

// StopPIDHolder kills a holder (and so every process left in its pid namespace) if it is
// still the process it was; one already gone is not an error.
func (r *Runtime) StopPIDHolder(h PIDHolder) error {
	defer r.reapShims()
	if h.Pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(h.Pid, 0)
	if err != nil {
		return nil // gone
	}
	defer unix.Close(fd)
	if !h.Alive() {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill the pod's pid namespace holder %d: %w", h.Pid, err)
	}
	return nil
}

// KillPIDHoldersUnder kills every pid namespace holder whose sandbox directory lies below dir
// (for `kubette down`: holders of sandboxes whose records were lost).
func KillPIDHoldersUnder(dir string) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if sb, ok := pauseSandbox(strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")); ok && strings.HasPrefix(sb, dir+"/") {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("kill pid namespace holder %d: %w", pid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// pauseFlag is the shim's flag that makes it a pid namespace holder.
const pauseFlag = "-pause"

// pauseSandbox returns the sandbox directory of a holder's command line, if argv is one.
func pauseSandbox(argv []string) (string, bool) {
	for i, a := range argv {
		if a == pauseFlag && i+2 < len(argv) && argv[i+1] == "-sandbox" {
			return argv[i+2], true
		}
	}
	return "", false
}

// runPause is the holder: init of the pod's pid namespace. It reaps the processes the
// namespace's other processes leave to it and ends on SIGTERM (or SIGKILL).
func runPause() int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE, syscall.SIGQUIT)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGTERM {
			return 0
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
				break
			}
		}
	}
	return 0
}

// PodNamespaces are what a pod's containers share besides the network, as under containerd
// the pause container and the sandbox's shm provide: the pod's IPC namespace and /dev/shm
// (unless the pod uses the host's IPC), and with shareProcessNamespace its pid namespace.
type PodNamespaces struct {
	IPC       string     `json:"ipc,omitempty"`       // the IPC namespace, bind-mounted on a file
	Shm       string     `json:"shm,omitempty"`       // a tmpfs the containers get as /dev/shm
	PIDHolder *PIDHolder `json:"pidHolder,omitempty"` // the pid namespace's init
}

// shmOptions are the pod's /dev/shm's, as containerd's sandbox shm (64 MiB).
const shmOptions = "mode=1777,size=65536k"

// SetupPodNamespaces makes a pod's shared namespaces in its sandbox directory dir: with ipc
// an IPC namespace (dir/ipc) and a /dev/shm tmpfs (dir/shm), with pid a pid namespace holder.
// What it made is removed again when a later part fails.
func (r *Runtime) SetupPodNamespaces(dir string, ipc, pid bool) (ns PodNamespaces, err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, r.RemovePodNamespaces(ns))
			ns = PodNamespaces{}
		}
	}()
	if ipc {
		p := filepath.Join(dir, "ipc")
		ns.IPC = p
		if err := createIPCNamespace(p); err != nil {
			return ns, err
		}
		shm := filepath.Join(dir, "shm")
		if err := os.Mkdir(shm, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return ns, fmt.Errorf("pod shm: %w", err)
		}
		ns.Shm = shm
		if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, shmOptions); err != nil {
			return ns, fmt.Errorf("mount the pod's shm at %s: %w", shm, err)
		}
	}
	if pid {
		h, err := r.StartPIDHolder(dir)
		if err != nil {
			return ns, err
		}
		ns.PIDHolder = &h
	}
	return ns, nil
}

// StopPodNamespaces ends the pod's pid namespace (its holder), as StopPodSandbox stops the
// pause container; the IPC namespace and shm stay until RemovePodNamespaces.
func (r *Runtime) StopPodNamespaces(ns PodNamespaces) error {
	if ns.PIDHolder == nil {
		return nil
	}
	return r.StopPIDHolder(*ns.PIDHolder)
}

// RemovePodNamespaces ends the holder and unmounts and removes the IPC namespace's file and
// the shm; what is already gone is not an error.
func (r *Runtime) RemovePodNamespaces(ns PodNamespaces) error {
	errs := []error{r.StopPodNamespaces(ns)}
	for _, p := range []string{ns.Shm, ns.IPC} {
		if p == "" {
			continue
		}
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// createIPCNamespace makes a new IPC namespace and bind-mounts it on path (a new file). The
// namespace is entered on a goroutine that locks its OS thread and never unlocks it, so the Go
// runtime ends that thread rather than run anything else in the namespace.
func createIPCNamespace(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create the pod's IPC namespace file: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked, see above
		if err := unix.Unshare(unix.CLONE_NEWIPC); err != nil {
			errc <- fmt.Errorf("unshare the pod's IPC namespace: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/ipc", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind-mount the pod's IPC namespace at %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	return <-errc
}
