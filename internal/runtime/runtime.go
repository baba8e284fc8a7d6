// Package runtime is kubette's built-in container runtime: it opens the image store, the runc
// runtime and the pod network under DATA_DIR/runtime and serves CRI on DATA_DIR/cri.sock.
package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/runtime/cri"
	"github.com/kubette/kubette/internal/runtime/image"
	"github.com/kubette/kubette/internal/runtime/network"
	"github.com/kubette/kubette/internal/runtime/oci"
	"github.com/kubette/kubette/internal/runtime/runc"
	"github.com/kubette/kubette/internal/runtime/steps"
	"github.com/kubette/kubette/internal/runtime/streaming"
)

// The real packages satisfy the CRI server's consumer interfaces.
var (
	_ cri.Images           = (*image.Store)(nil)
	_ cri.Containers       = (*runc.Runtime)(nil)
	_ cri.Network          = (*network.Manager)(nil)
	_ cri.Streaming        = (*streaming.Server)(nil)
	_ streaming.Containers = (*runc.Runtime)(nil)
)

// Config configures the runtime.
type Config struct {
	DataDir       string   // default /var/lib/kubette
	Runc          string   // runc binary; default "runc"
	Shim          []string // argv that starts the shim; default: kubette-shim beside the executable (when it speaks runc.ShimProtocol), else {os.Executable(), "shim"}
	CNIPluginDirs []string // default {"/usr/lib/cni", "/opt/cni/bin"}
	Bridge        string   // default "kubette0"
	// Version is the binary's version that CRI Version reports (an addition to the
	// contract: the runtime package cannot know the binary's version); default: the main
	// module's version from the build info.
	Version string
	// StreamAddr is where the streaming server (exec, attach, port-forward) listens; default
	// streaming.DefaultAddr (loopback, a free port). The kubelet of this machine proxies to it.
	StreamAddr string
	// Logger logs what the runtime does (default: slog.Default()).
	Logger *slog.Logger
	// Client, when set, receives the runtime's steps of each pod (CNI ADD, runc create,
	// start, kill, delete) as Events (runtime/steps), reported by NodeName (default: the
	// host name). Nil: the runtime needs no API server.
	Client   kubernetes.Interface
	NodeName string
	// Local, when set, is given an in-process connection to the CRI server once it is open
	// (for `kubette up`'s kubelet); the socket is served either way.
	Local *Local
	// InsecureRegistries are the registries pulls may reach over plain HTTP and whose HTTPS
	// certificates they do not verify: "host", "host:port", "[v6]:port" or a CIDR
	// (image.Registries). Run fails on a malformed entry.
	InsecureRegistries []string
}

// SocketPath is the CRI endpoint of a data directory.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, "cri.sock") }

// Run serves CRI on DATA_DIR/cri.sock until ctx ends. Containers keep running after it
// returns; a later Run adopts them. It first mounts a tmpfs on the directories of runc's state,
// the sandboxes, the containers, the network namespaces and the CNI state unless they are
// already (volatile.go).
func Run(ctx context.Context, cfg Config) error {
	if cfg.Local != nil {
		defer cfg.Local.stopped()
	}
	if _, err := image.ParseRegistries(cfg.InsecureRegistries); err != nil {
		return fmt.Errorf("runtime: %w", err) // before anything is mounted
	}
	var rec *steps.Recorder
	if cfg.Client != nil {
		if cfg.NodeName == "" {
			h, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("runtime: node name: %w", err)
			}
			cfg.NodeName = h
		}
		rec = steps.New(cfg.Client, cfg.NodeName, cfg.Logger)
	}
	dataDir, err := filepath.Abs(defaultDataDir(cfg.DataDir))
	if err != nil {
		return fmt.Errorf("runtime: data dir: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := mountVolatile(filepath.Join(dataDir, "runtime"), logger); err != nil {
		return err
	}
	p, err := open(ctx, cfg, true, rec)
	if err != nil {
		return err
	}
	cfg = p.cfg
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stepsDone := make(chan struct{})
	if rec != nil {
		go func() { defer close(stepsDone); rec.Run(ctx) }()
	} else {
		close(stepsDone)
	}
	defer func() { cancel(); <-stepsDone }()
	streamErr := make(chan error, 1)
	go func() {
		err := p.stream.Serve(ctx)
		if err != nil {
			cancel()
		}
		streamErr <- err
	}()
	var local *cri.LocalConn
	if cfg.Local != nil {
		local = p.srv.LocalConn()
		cfg.Local.set(local)
	}
	cfg.Logger.Info("CRI runtime serving", "socket", SocketPath(cfg.DataDir), "streaming", p.stream.Addr().String(), "in-process", local != nil)
	err = cri.Serve(ctx, SocketPath(cfg.DataDir), p.srv)
	cancel()
	if local != nil {
		// As the socket's graceful stop, which cuts off calls still running after a few
		// seconds: a warning, not a failure of the runtime.
		if cerr := local.Close(localGrace); cerr != nil {
			cfg.Logger.Warn("stopping the in-process CRI connection", "err", cerr)
		}
	}
	return errors.Join(err, <-streamErr, p.rt.Close())
}

// Down stops and removes every container and sandbox of DATA_DIR (unmounting their root
// filesystems), then tears down the pod network (every sandbox network and the bridge), and
// finally sweeps what no record names: containers left in runc's state, mounts below
// DATA_DIR/runtime, writable layers of containers without a directory and the bridge's pod
// masquerade.
func Down(ctx context.Context, cfg Config) error {
	if cfg.Bridge == "" {
		// The bridge the cluster's pods were on, as its runtime recorded it (up --bridge).
		bridge, err := network.RecordedBridge(filepath.Join(defaultDataDir(cfg.DataDir), "runtime", "cni"))
		if err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
		cfg.Bridge = bridge
	}
	p, err := open(ctx, cfg, false, nil)
	if err != nil {
		return err
	}
	return errors.Join(p.srv.Down(ctx), p.net.Cleanup(ctx), sweep(ctx, p.cfg.Runc, filepath.Join(p.cfg.DataDir, "runtime"), p.cfg.Bridge))
}

// parts are the opened pieces of the runtime.
type parts struct {
	cfg    Config
	srv    *cri.Server
	net    *network.Manager
	stream *streaming.Server // nil for Down
	rt     *runc.Runtime
}

// open fills cfg's defaults and opens the stores and the CRI server, and with withStreaming
// the streaming server (listening); rec, when not nil, is told the pods' steps.
func open(ctx context.Context, cfg Config, withStreaming bool, rec *steps.Recorder) (parts, error) {
	cfg.DataDir = defaultDataDir(cfg.DataDir)
	if cfg.Runc == "" {
		cfg.Runc = "runc"
	}
	if cfg.Bridge == "" {
		cfg.Bridge = "kubette0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	insecure, err := image.ParseRegistries(cfg.InsecureRegistries)
	if err != nil {
		return parts{}, fmt.Errorf("runtime: %w", err)
	}
	if cfg.Version == "" {
		cfg.Version = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			cfg.Version = bi.Main.Version
		}
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return parts{}, fmt.Errorf("runtime: data dir: %w", err)
	}
	cfg.DataDir = dataDir
	dir := filepath.Join(dataDir, "runtime")
	imageDir := filepath.Join(dir, "images")
	images, err := image.Open(imageDir)
	if err != nil {
		return parts{}, fmt.Errorf("runtime: open image store: %w", err)
	}
	runcRoot := filepath.Join(dir, "runc")
	rcfg := runc.Config{Binary: cfg.Runc, Root: runcRoot, Shim: cfg.Shim, ShimPool: shimPool}
	if withStreaming {
		// A serving runtime runs runc from a sealed copy of its binary: runc's init then
		// makes no copy of itself per container (runc/clonedbin.go).
		rcfg.SealedCopy = true
	}
	rt, err := runc.New(rcfg)
	if err != nil {
		return parts{}, fmt.Errorf("runtime: %w", err)
	}
	net, err := network.New(network.Config{PluginDirs: cfg.CNIPluginDirs, StateDir: filepath.Join(dir, "cni"),
		NetNSDir: filepath.Join(dir, "netns"), Bridge: cfg.Bridge})
	if err != nil {
		return parts{}, fmt.Errorf("runtime: %w", err)
	}
	limits := hostLimits()
	var srv *cri.Server
	var stream *streaming.Server
	var streamCfg cri.Streaming // a nil *streaming.Server must stay a nil interface
	if withStreaming {
		stream, err = streaming.Listen(streaming.Config{
			Addr: cfg.StreamAddr, Containers: rt, Logger: cfg.Logger,
			// srv is set below, before the first request can arrive (it needs a URL from srv).
			NetNS: func(id string) (string, error) { return srv.SandboxNetNS(id) },
		})
		if err != nil {
			return parts{}, fmt.Errorf("runtime: %w", err)
		}
		streamCfg = stream
	}
	var stepsCfg cri.Steps // a nil *steps.Recorder must stay a nil interface
	if rec != nil {
		stepsCfg = rec
	}
	srv, err = cri.New(ctx, cri.Config{
		Dir: dir, ImageDir: imageDir, Images: images, Containers: rt, Network: net, Steps: stepsCfg,
		Spec: func(in oci.Input) (*specs.Spec, error) {
			in.MaxNOFILE, in.HostCapabilities = limits.nofile, limits.caps
			return oci.Spec(in)
		},
		Version: cfg.Version, Runc: cfg.Runc, RuncRoot: runcRoot, Logger: cfg.Logger, Handlers: handlers(cfg.Runc),
		Streaming: streamCfg, InsecureRegistries: insecure,
	})
	if err != nil {
		if stream != nil {
			_ = stream.Close()
		}
		return parts{}, err
	}
	return parts{cfg: cfg, srv: srv, net: net, stream: stream, rt: rt}, nil
}

// handlers are the RuntimeClass handlers the runtime serves besides the default: the name
// of its OCI runtime ("runc", or "crun" when it runs crun), so that a class whose handler
// names it runs as a pod without a class does. Every other handler is refused at
// RunPodSandbox, as containerd refuses one its configuration has no runtime for.
func handlers(ociRuntime string) []string {
	return []string{filepath.Base(ociRuntime)}
}

// defaultDataDir is dir, or /var/lib/kubette for "".
func defaultDataDir(dir string) string {
	if dir == "" {
		return "/var/lib/kubette"
	}
	return dir
}

// shimPool is how many container shims the runtime keeps started ahead of CreateContainer
// (runc.Config.ShimPool): one start of the kubette binary less on each container's create.
// The pool fills at the first create, so `kubette down` starts none.
const shimPool = 2

// limits are what this process may hand to containers.
type limits struct {
	nofile uint64   // hard RLIMIT_NOFILE
	caps   []string // effective capabilities; nil when unknown
}

// hostLimits reads this process's hard NOFILE limit and effective capabilities: a container
// cannot get more than the runtime holds (root here may lack CAP_SYS_RESOURCE).
func hostLimits() limits {
	var l limits
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil {
		l.nofile = rl.Max
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return l
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		hexCaps, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hexCaps), 16, 64)
		if err != nil {
			return l
		}
		l.caps = []string{}
		for bit, name := range oci.AllCapabilities() {
			if mask&(1<<uint(bit)) != 0 {
				l.caps = append(l.caps, name)
			}
		}
	}
	return l
}
