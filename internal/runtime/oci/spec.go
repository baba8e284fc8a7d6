package oci

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Input is everything Spec needs to build a container's OCI spec.
type Input struct {
	Container *runtimeapi.ContainerConfig
	Sandbox   *runtimeapi.PodSandboxConfig
	Image     ocispec.ImageConfig
	Rootfs    string // absolute path of the mounted rootfs
	NetNSPath string // "" = host network
	// TargetPIDNamespace is the pid namespace to join when the container's pid
	// NamespaceMode is TARGET (an ephemeral container sharing another
	// container's processes), e.g. "/proc/<target init pid>/ns/pid".
	TargetPIDNamespace string
	// PodPIDNamespace is the pod's shared pid namespace, joined when the container's pid
	// NamespaceMode is POD (shareProcessNamespace), e.g. "/proc/<holder pid>/ns/pid".
	PodPIDNamespace string
	// IPCNamespace is the pod's IPC namespace (a bind-mounted namespace file), joined unless
	// the container uses the host's; "" gives the container an IPC namespace of its own.
	IPCNamespace string
	Hostname     string // the pod's; HOSTNAME env, and the UTS name unless on the host network
	CgroupsPath  string // cgroup v1 path below the hierarchy roots, e.g. "/kubette/pod<uid>/<container id>"
	// SandboxFiles are bind-mounted over /etc/hostname, /etc/hosts and /etc/resolv.conf, and
	// Shm (the pod's shared tmpfs) over /dev/shm, when set and when no CRI mount already
	// targets that path.
	SandboxFiles SandboxFiles
	// MaxOOMScoreAdj is the runtime's own /proc/self/oom_score_adj: never ask for less, since
	// lowering it needs CAP_SYS_RESOURCE (the name is the contract's; it is a lower bound).
	MaxOOMScoreAdj int
	// MaxNOFILE is the runtime's own hard RLIMIT_NOFILE: the container's NOFILE limit
	// (1048576, as containerd's) is clamped to it, since raising a hard limit needs
	// CAP_SYS_RESOURCE. 0 means no clamp.
	MaxNOFILE uint64
	// HostCapabilities are the capabilities the runtime itself holds ("CAP_CHOWN", ...):
	// what privileged containers and "ALL" get, as containerd's WithAllCurrentCapabilities.
	// nil means every capability this package knows.
	HostCapabilities []string
}

// SandboxFiles are the sandbox's files and directories its containers share.
type SandboxFiles struct{ Hostname, Hosts, ResolvConf, Shm string }

// DefaultPath is the PATH of a container whose image sets none (containerd's default).
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultNOFILE is the RLIMIT_NOFILE containers get, as under containerd.
const DefaultNOFILE = 1048576

// ociVersion is the ociVersion of the specs Spec writes. The fields it sets are those of
// runtime-spec 1.0.2 but linux.resources.unified (cgroup v2 only), which runc and crun read
// whatever the version; crun as Debian 12 ships it (1.8) refuses a config.json of any version
// but 1.0.x ("unknown version specified"), while runc takes either: the specs name 1.0.2,
// not the version of the Go module (specs.Version).
const ociVersion = "1.0.2-dev"

// Spec builds the OCI runtime spec of a container. It writes nothing; it reads only the
// rootfs's /etc/passwd and /etc/group to resolve user names, and the host's device nodes the
// CRI config names.
func Spec(in Input) (*specs.Spec, error) {
	c := in.Container
	if c == nil {
		return nil, errors.New("oci spec: no container config")
	}
	if in.Rootfs == "" || !filepath.IsAbs(in.Rootfs) {
		return nil, fmt.Errorf("oci spec: rootfs %q is not an absolute path", in.Rootfs)
	}
	sc := c.GetLinux().GetSecurityContext()
	privileged := sc.GetPrivileged()
	if privileged && !in.Sandbox.GetLinux().GetSecurityContext().GetPrivileged() {
		return nil, errors.New("oci spec: no privileged container allowed in an unprivileged sandbox")
	}

	args, err := processArgs(c.GetCommand(), c.GetArgs(), in.Image.Entrypoint, in.Image.Cmd)
	if err != nil {
		return nil, err
	}
	user, err := resolveUser(in.Rootfs, sc, in.Image.User)
	if err != nil {
		return nil, err
	}
	caps, err := capabilities(sc.GetCapabilities(), privileged, in.HostCapabilities)
	if err != nil {
		return nil, err
	}
	if sc.GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_TARGET && in.TargetPIDNamespace == "" {
		return nil, fmt.Errorf("pid namespace mode TARGET (target %q) without the target's namespace", sc.GetNamespaceOptions().GetTargetId())
	}

	hostNetwork := in.NetNSPath == ""
	s := &specs.Spec{
		Version: ociVersion,
		Root:    &specs.Root{Path: in.Rootfs, Readonly: sc.GetReadonlyRootfs()},
		Process: &specs.Process{
			Terminal:        c.GetTty(),
			User:            user,
			Args:            args,
			Env:             env(in.Hostname, in.Image.Env, c.GetEnvs(), c.GetTty()),
			Cwd:             workingDir(c.GetWorkingDir(), in.Image.WorkingDir),
			Capabilities:    caps,
			NoNewPrivileges: sc.GetNoNewPrivs(),
			Rlimits:         []specs.POSIXRlimit{nofile(in.MaxNOFILE)},
			OOMScoreAdj:     oomScoreAdj(c.GetLinux().GetResources().GetOomScoreAdj(), in.MaxOOMScoreAdj),
		},
		Annotations: annotations(c, in.Sandbox),
		Linux: &specs.Linux{
			CgroupsPath: in.CgroupsPath,
			Namespaces:  namespaces(sc.GetNamespaceOptions(), in),
			Resources:   resources(c.GetLinux().GetResources(), privileged),
			Sysctl:      copyMap(in.Sandbox.GetLinux().GetSysctls()),
		},
	}
	if !hostNetwork {
		// A host-network pod keeps the host's UTS namespace and so the host's name.
		s.Hostname = in.Hostname
	}
	if !privileged {
		s.Linux.MaskedPaths = defaultMaskedPaths()
		if p := sc.GetMaskedPaths(); len(p) > 0 {
			s.Linux.MaskedPaths = append([]string(nil), p...)
		}
		s.Linux.ReadonlyPaths = defaultReadonlyPaths()
		if p := sc.GetReadonlyPaths(); len(p) > 0 {
			s.Linux.ReadonlyPaths = append([]string(nil), p...)
		}
	}
	devs, rules, err := devices(c.GetDevices())
	if err != nil {
		return nil, err
	}
	s.Linux.Devices = devs
	if !privileged {
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, rules...)
	}
	mounts, rootProp, err := mounts(c.GetMounts(), in.SandboxFiles, sc.GetReadonlyRootfs(), privileged)
	if err != nil {
		return nil, err
	}
	s.Mounts = mounts
	s.Linux.RootfsPropagation = rootProp
	return s, nil
}

// processArgs applies Kubernetes' rules: command replaces the image's Entrypoint and drops its
// Cmd; args alone replace Cmd.
func processArgs(command, args, entrypoint, cmd []string) ([]string, error) {
	var out []string
	switch {
	case len(command) > 0:
		out = append(append(out, command...), args...)
	case len(args) > 0:
		out = append(append(out, entrypoint...), args...)
	default:
		out = append(append(out, entrypoint...), cmd...)
	}
	if len(out) == 0 {
		return nil, errors.New("oci spec: no command specified (neither in the container nor in the image)")
	}
	return out, nil
}

// env is the default PATH, HOSTNAME, the image's env, then the CRI env, and TERM=xterm for a
// container with a terminal unless one of them sets TERM; a later value for a name replaces
// the earlier one in place.
func env(hostname string, image []string, cri []*runtimeapi.KeyValue, tty bool) []string {
	var out []string
	index := map[string]int{}
	set := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			out[i] = kv
			return
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	set(DefaultPath)
	if hostname != "" {
		set("HOSTNAME=" + hostname)
	}
	for _, kv := range image {
		set(kv)
	}
	for _, kv := range cri {
		set(kv.GetKey() + "=" + string(kv.GetValue()))
	}
	if _, ok := index["TERM"]; tty && !ok {
		set("TERM=xterm") // as containerd gives a container with a terminal
	}
	return out
}

func workingDir(cri, image string) string {
	if cri != "" {
		return cri
	}
	if image != "" {
		return image
	}
	return "/"
}

func nofile(max uint64) specs.POSIXRlimit {
	n := uint64(DefaultNOFILE)
	if max > 0 && max < n {
		n = max
	}
	return specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: n, Soft: n}
}

func oomScoreAdj(want int64, floor int) *int {
	v := int(want)
	if v < floor {
		v = floor
	}
	return &v
}

// namespaces: pid, ipc, uts and mount are new (the pod-wide pid and ipc namespaces of
// NamespaceMode POD are per container here); NODE shares the host's; the network namespace is
// netns when set, the host's otherwise (and then the host's UTS namespace too); TARGET joins
// targetPID, the pid namespace of another container.
func namespaces(opts *runtimeapi.NamespaceOption, in Input) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	switch opts.GetPid() {
	case runtimeapi.NamespaceMode_NODE:
	case runtimeapi.NamespaceMode_TARGET:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: in.TargetPIDNamespace})
	case runtimeapi.NamespaceMode_POD:
		// The pod's, when the sandbox has one (else the container's own, as CONTAINER).
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: in.PodPIDNamespace})
	default:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	if opts.GetIpc() != runtimeapi.NamespaceMode_NODE {
		ns = append(ns, specs.LinuxNamespace{Type: specs.IPCNamespace, Path: in.IPCNamespace})
	}
	if in.NetNSPath != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.UTSNamespace},
			specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: in.NetNSPath})
	}
	return ns
}

func resources(r *runtimeapi.LinuxContainerResources, privileged bool) *specs.LinuxResources {
	out := &specs.LinuxResources{
		// Deny every device, then runc adds its default allow list (null, zero, full, tty,
		// random, urandom, ptmx, pts), as containerd's default spec does.
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	if privileged {
		out.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	}
	if r == nil {
		return out
	}
	cpu := &specs.LinuxCPU{Cpus: r.GetCpusetCpus(), Mems: r.GetCpusetMems()}
	if v := r.GetCpuShares(); v != 0 {
		u := uint64(v)
		cpu.Shares = &u
	}
	if v := r.GetCpuQuota(); v != 0 {
		cpu.Quota = &v
	}
	if v := r.GetCpuPeriod(); v != 0 {
		u := uint64(v)
		cpu.Period = &u
	}
	if *cpu != (specs.LinuxCPU{}) {
		out.CPU = cpu
	}
	if v := r.GetMemoryLimitInBytes(); v != 0 {
		out.Memory = &specs.LinuxMemory{Limit: &v}
		if sw := r.GetMemorySwapLimitInBytes(); sw != 0 {
			out.Memory.Swap = &sw
		}
	}
	for _, h := range r.GetHugepageLimits() {
		out.HugepageLimits = append(out.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: h.GetPageSize(), Limit: h.GetLimit()})
	}
	if u := r.GetUnified(); len(u) > 0 {
		out.Unified = copyMap(u)
	}
	return out
}

// annotations are the CRI ones plus the io.kubernetes.cri.* keys containerd sets.
func annotations(c *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) map[string]string {
	a := copyMap(c.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	a["io.kubernetes.cri.container-type"] = "container"
	a["io.kubernetes.cri.container-name"] = c.GetMetadata().GetName()
	a["io.kubernetes.cri.image-name"] = c.GetImage().GetImage()
	if md := sb.GetMetadata(); md != nil {
		a["io.kubernetes.cri.sandbox-name"] = md.GetName()
		a["io.kubernetes.cri.sandbox-namespace"] = md.GetNamespace()
		a["io.kubernetes.cri.sandbox-uid"] = md.GetUid()
	}
	return a
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// defaultMaskedPaths are containerd's.
func defaultMaskedPaths() []string {
	return []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
		"/sys/devices/virtual/powercap", "/proc/scsi"}
}

// defaultReadonlyPaths are containerd's.
func defaultReadonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

// mounts are containerd's: the default mounts in their order, less those a CRI mount replaces
// (a CRI /dev or /sys replaces everything below it too), then the sandbox files and the CRI
// mounts sorted by depth (stable), so that a parent is mounted before its children. It returns
// the rootfs propagation the CRI mounts need ("" for the default).
func mounts(cri []*runtimeapi.Mount, files SandboxFiles, readonlyRootfs, privileged bool) ([]specs.Mount, string, error) {
	taken := map[string]bool{}
	var extra []specs.Mount
	rootProp := ""
	for _, m := range cri {
		dst := m.GetContainerPath()
		if !path.IsAbs(dst) {
			return nil, "", fmt.Errorf("oci spec: mount destination %q is not absolute", dst)
		}
		if m.GetHostPath() == "" {
			return nil, "", fmt.Errorf("oci spec: mount %q has no host path", dst)
		}
		dst = path.Clean(dst)
		opts := []string{"rbind"}
		switch m.GetPropagation() {
		case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
			opts = append(opts, "rshared")
			rootProp = "rshared"
		case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
			opts = append(opts, "rslave")
			if rootProp == "" {
				rootProp = "rslave"
			}
		default:
			opts = append(opts, "rprivate")
		}
		if m.GetReadonly() {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		taken[dst] = true
		extra = append(extra, specs.Mount{Destination: dst, Type: "bind", Source: m.GetHostPath(), Options: opts})
	}
	for _, f := range []struct{ dst, src string }{
		{"/etc/hostname", files.Hostname}, {"/etc/hosts", files.Hosts}, {"/etc/resolv.conf", files.ResolvConf},
	} {
		if f.src == "" || taken[f.dst] {
			continue
		}
		opts := []string{"rbind", "rprivate", "rw"}
		if readonlyRootfs {
			opts[2] = "ro"
		}
		taken[f.dst] = true
		extra = append(extra, specs.Mount{Destination: f.dst, Type: "bind", Source: f.src, Options: opts})
	}
	// The pod's /dev/shm, shared by its containers as their IPC namespace is (containerd's
	// sandbox shm): writable even on a read-only root filesystem, as the tmpfs it replaces.
	if files.Shm != "" && !taken["/dev/shm"] && !taken["/dev"] {
		taken["/dev/shm"] = true
		extra = append(extra, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: files.Shm,
			Options: []string{"rbind", "rprivate", "rw", "nosuid", "nodev", "noexec"}})
	}
	sort.SliceStable(extra, func(i, j int) bool { return depth(extra[i].Destination) < depth(extra[j].Destination) })
	var out []specs.Mount
	for _, m := range defaultMounts(privileged) {
		switch {
		case taken[m.Destination]:
		case taken["/dev"] && strings.HasPrefix(m.Destination, "/dev/"):
		case taken["/sys"] && strings.HasPrefix(m.Destination, "/sys/"):
		default:
			out = append(out, m)
		}
	}
	return append(out, extra...), rootProp, nil
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(path.Clean(p), "/")
}

// defaultMounts are containerd's default mounts without /run (its CRI plugin drops it: images
// may ship content there) plus the read-only cgroup mount its CRI plugin
// adds; privileged containers get /sys and the cgroups writable.
func defaultMounts(privileged bool) []specs.Mount {
	ro := "ro"
	if privileged {
		ro = "rw"
	}
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", ro}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", ro}},
	}
}
