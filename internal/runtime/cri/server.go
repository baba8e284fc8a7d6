// Package cri serves the Container Runtime Interface (k8s.io/cri-api runtime v1) of kubette's
// built-in runtime over gRPC. It is the only package of the runtime that knows the others: it
// keeps the sandboxes' and containers' records (meta.json under the data directory), drives the
// image store, the low-level runtime and the pod network through small interfaces, and reloads
// its records on start, adopting containers that kept running.
package cri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/image"
)

// Config configures a Server.
type Config struct {
	// Dir is DATA_DIR/runtime: sandboxes/<id>/, containers/<id>/ and writable/<id>/ (a
	// container's writable layer, kept apart from its directory: the runtime keeps the
	// containers' directories on a tmpfs and their writable layers on disk) live below it.
	Dir string
	// ImageDir is where the image store keeps its files (reported by ImageFsInfo).
	ImageDir string
	// Images, Containers and Network are the packages the server drives.
	Images     Images
	Containers Containers
	Network    Network
	// Streaming serves Exec, Attach and PortForward (nil: they answer Unimplemented).
	Streaming Streaming
	// Spec builds a container's OCI spec (runtime/oci.Spec).
	Spec SpecFunc
	// Version is the version of the binary, reported by Version.
	Version string
	// Handlers are the CRI runtime handlers (RuntimeClass handlers) the server runs pods
	// with besides the default "": all of them with Containers, as a containerd whose
	// runtimes table names the same OCI runtime under several names. A sandbox asked for
	// another handler is refused.
	Handlers []string
	// Runc and RuncRoot, when set, let UpdateContainerResources call `runc update`.
	Runc, RuncRoot string
	// CgroupRoot is where the cgroup v1 hierarchies are mounted (default /sys/fs/cgroup).
	CgroupRoot string
	// ProcRoot is where the host's procfs is mounted (default /proc).
	ProcRoot string
	// HostResolvConf and HostHosts are the host's files copied into sandboxes (defaults
	// /etc/resolv.conf and /etc/hosts).
	HostResolvConf, HostHosts string
	// SandboxStopGrace is how long StopPodSandbox lets containers stop after SIGTERM (default 2s).
	SandboxStopGrace time.Duration
	// PollInterval is how often a stopping container's state is polled (default 50ms).
	PollInterval time.Duration
	// Logger logs what the server does (default: discard).
	Logger *slog.Logger
	// Steps is told what each of a pod's runtime steps did (nil: nobody; see Steps).
	Steps Steps
	// InsecureRegistries are the registries PullImage may reach over plain HTTP and whose
	// HTTPS certificates it does not verify (image.PullOptions.Insecure); zero: none.
	InsecureRegistries image.Registries
}

// Server implements runtimeapi.RuntimeServiceServer and runtimeapi.ImageServiceServer.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg       Config
	log       *slog.Logger
	oomAdj    int
	mu        sync.Mutex // guards the maps and the records' fields
	sandboxes map[string]*sandbox
	ctrs      map[string]*container
}

var (
	_ runtimeapi.RuntimeServiceServer = (*Server)(nil)
	_ runtimeapi.ImageServiceServer   = (*Server)(nil)
)

// New validates cfg, fills defaults, loads the records under cfg.Dir and reconciles them
// with the low-level runtime: running containers stay running, stopped ones become EXITED,
// and what a crash left half-created or half-removed is removed. Only one Server may use a
// directory at a time.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" || cfg.Images == nil || cfg.Containers == nil || cfg.Network == nil || cfg.Spec == nil {
		return nil, errors.New("cri: Dir, Images, Containers, Network and Spec are required")
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.HostResolvConf == "" {
		cfg.HostResolvConf = "/etc/resolv.conf"
	}
	if cfg.HostHosts == "" {
		cfg.HostHosts = "/etc/hosts"
	}
	if cfg.SandboxStopGrace == 0 {
		cfg.SandboxStopGrace = 2 * time.Second
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sandboxes: map[string]*sandbox{}, ctrs: map[string]*container{}}
	s.oomAdj = ownOOMScoreAdj()
	for _, d := range []string{s.sandboxesDir(), s.containersDir(), s.writablesDir()} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("cri: create %s: %w", d, err)
		}
	}
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) sandboxesDir() string          { return filepath.Join(s.cfg.Dir, "sandboxes") }
func (s *Server) containersDir() string         { return filepath.Join(s.cfg.Dir, "containers") }
func (s *Server) sandboxDir(id string) string   { return filepath.Join(s.sandboxesDir(), id) }
func (s *Server) containerDir(id string) string { return filepath.Join(s.containersDir(), id) }
func (s *Server) writablesDir() string          { return filepath.Join(s.cfg.Dir, "writable") }
func (s *Server) writableDir(id string) string  { return filepath.Join(s.writablesDir(), id) }

// newID returns 64 random lowercase hex characters, as containerd's IDs.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// ownOOMScoreAdj reads this process's oom_score_adj: containers never ask for less.
func ownOOMScoreAdj() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// findSandbox returns the sandbox with this ID or unique ID prefix.
func (s *Server) findSandbox(id string) (*sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "pod sandbox ID is empty")
	}
	if sb, ok := s.sandboxes[id]; ok {
		return sb, nil
	}
	var found *sandbox
	for k, sb := range s.sandboxes {
		if strings.HasPrefix(k, id) {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "pod sandbox ID prefix %q is ambiguous", id)
			}
			found = sb
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", id)
	}
	return found, nil
}

// findContainer returns the container with this ID or unique ID prefix.
func (s *Server) findContainer(id string) (*container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "container ID is empty")
	}
	if c, ok := s.ctrs[id]; ok {
		return c, nil
	}
	var found *container
	for k, c := range s.ctrs {
		if strings.HasPrefix(k, id) {
			if found != nil {
				return nil, status.Errorf(codes.InvalidArgument, "container ID prefix %q is ambiguous", id)
			}
			found = c
		}
	}
	if found == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", id)
	}
	return found, nil
}

// isNotFound reports whether err is a gRPC NotFound status.
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// cleanupContext is a context for undoing work after ctx failed or was cancelled.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}
