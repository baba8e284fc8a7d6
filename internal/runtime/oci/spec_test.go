package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
)

// update rewrites the golden files: go test ./internal/runtime/oci -run Golden -update

// rootfs makes a rootfs with an /etc/passwd and /etc/group.
func rootfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("passwd", "root:x:0:0:root:/root:/bin/sh\n# comment\nnginx:x:101:102:nginx:/:/sbin/nologin\napp:x:1000:1000::/home/app:/bin/sh\nselfish:x:1001:1001::/:/bin/sh\n")
	write("group", "root:x:0:\nnginx:x:102:\napp:x:1000:\nwheel:x:10:app,other\naudio:x:29:app\nstaff:x:50:\nselfish:x:1002:selfish\n")
	return dir
}

func base(t *testing.T) Input {
	return Input{
		Container: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "web"},
			Image:    &runtimeapi.ImageSpec{Image: "localhost:5000/web:v1"},
		},
		Sandbox: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-0", Namespace: "default", Uid: "uid-1"},
		},
		Image:       ocispec.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"serve"}, Env: []string{"PATH=/app/bin", "A=image"}},
		Rootfs:      rootfs(t),
		NetNSPath:   "/var/lib/kubette/runtime/netns/abc",
		Hostname:    "web-0",
		CgroupsPath: "/kubette/poduid-1/c1",
	}
}

func mustSpec(t *testing.T, in Input) *specs.Spec {
	t.Helper()
	s, err := Spec(in)
	if err != nil {
		t.Fatalf("Spec: %v", err)
	}
	return s
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		command, args, entrypoint, cm []string
		want                          []string
	}{
		{"image only", nil, nil, []string{"/e"}, []string{"c"}, []string{"/e", "c"}},
		{"command drops cmd", []string{"/x"}, nil, []string{"/e"}, []string{"c"}, []string{"/x"}},
		{"command and args", []string{"/x"}, []string{"a"}, []string{"/e"}, []string{"c"}, []string{"/x", "a"}},
		{"args replace cmd", nil, []string{"a", "b"}, []string{"/e"}, []string{"c"}, []string{"/e", "a", "b"}},
		{"args without entrypoint", nil, []string{"/a"}, nil, []string{"c"}, []string{"/a"}},
		{"cmd only", nil, nil, nil, []string{"/c", "x"}, []string{"/c", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Container.Command, in.Container.Args = tc.command, tc.args
			in.Image.Entrypoint, in.Image.Cmd = tc.entrypoint, tc.cm
			if got := mustSpec(t, in).Process.Args; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("args = %q, want %q", got, tc.want)
			}
		})
	}
	in := base(t)
	in.Image.Entrypoint, in.Image.Cmd = nil, nil
	if _, err := Spec(in); err == nil {
		t.Error("no command at all: want an error")
	}
}

func TestEnv(t *testing.T) {
	in := base(t)
	in.Container.Envs = []*runtimeapi.KeyValue{{Key: "A", Value: []byte("cri")}, {Key: "B", Value: []byte("x=y")}}
	want := []string{"PATH=/app/bin", "HOSTNAME=web-0", "A=cri", "B=x=y"}
	if got := mustSpec(t, in).Process.Env; !reflect.DeepEqual(got, want) {
		t.Errorf("env = %q, want %q", got, want)
	}
	in.Image.Env = nil
	in.Container.Envs = nil
	want = []string{DefaultPath, "HOSTNAME=web-0"}
	if got := mustSpec(t, in).Process.Env; !reflect.DeepEqual(got, want) {
		t.Errorf("env without image env = %q, want %q", got, want)
	}
}

func TestWorkingDir(t *testing.T) {
	in := base(t)
	if got := mustSpec(t, in).Process.Cwd; got != "/" {
		t.Errorf("default cwd = %q", got)
	}
	in.Image.WorkingDir = "/img"
	if got := mustSpec(t, in).Process.Cwd; got != "/img" {
		t.Errorf("image cwd = %q", got)
	}
	in.Container.WorkingDir = "/cri"
	if got := mustSpec(t, in).Process.Cwd; got != "/cri" {
		t.Errorf("cri cwd = %q", got)
	}
}

func TestUser(t *testing.T) {
	i64 := func(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }
	for _, tc := range []struct {
		name      string
		imageUser string
		sc        *runtimeapi.LinuxContainerSecurityContext
		want      specs.User
		wantErr   bool
	}{
		{name: "default root", want: specs.User{UID: 0, GID: 0, AdditionalGids: []uint32{0}}},
		{name: "image root name", imageUser: "root", want: specs.User{AdditionalGids: []uint32{0}}},
		{name: "image numeric listed", imageUser: "101", want: specs.User{UID: 101, GID: 102, AdditionalGids: []uint32{102}}},
		{name: "image numeric unlisted", imageUser: "4242", want: specs.User{UID: 4242, GID: 0, AdditionalGids: []uint32{0}}},
		{name: "image uid:gid", imageUser: "4242:77", want: specs.User{UID: 4242, GID: 77, AdditionalGids: []uint32{77}}},
		{name: "image name with groups", imageUser: "app", want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 10, 29}}},
		{name: "image name:group", imageUser: "app:staff", want: specs.User{UID: 1000, GID: 50, AdditionalGids: []uint32{50, 10, 29}}},
		{name: "image unknown name", imageUser: "nobody", wantErr: true},
		{name: "image unknown group", imageUser: "app:nogroup", wantErr: true},
		{name: "run_as_user over image", imageUser: "app", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(101)},
			want: specs.User{UID: 101, GID: 102, AdditionalGids: []uint32{102}}},
		{name: "run_as_user and group and supplemental", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: i64(2000), RunAsGroup: i64(3000), SupplementalGroups: []int64{4000, 3000}},
			want: specs.User{UID: 2000, GID: 3000, AdditionalGids: []uint32{3000, 4000}}},
		{name: "run_as_username", sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "nginx"},
			want: specs.User{UID: 101, GID: 102, AdditionalGids: []uint32{102}}},
		{name: "strict policy ignores /etc/group", imageUser: "app", sc: &runtimeapi.LinuxContainerSecurityContext{
			SupplementalGroups: []int64{4000}, SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict},
			want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 4000}}},
		{name: "group named as the user is not supplemental", imageUser: "selfish",
			want: specs.User{UID: 1001, GID: 1001, AdditionalGids: []uint32{1001}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Image.User = tc.imageUser
			in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: tc.sc}
			s, err := Spec(in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got user %+v", s.Process.User)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Process.User, tc.want) {
				t.Errorf("user = %+v, want %+v", s.Process.User, tc.want)
			}
		})
	}
}

func TestUserSymlinkStaysInRootfs(t *testing.T) {
	in := base(t)
	p := filepath.Join(in.Rootfs, "etc", "passwd")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	// An absolute symlink must resolve inside the rootfs, never to the host's /etc/passwd.
	if err := os.Symlink("/etc/passwd2", p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.Rootfs, "etc", "passwd2"), []byte("root:x:0:0::/:/bin/sh\nweird:x:7:8::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.Image.User = "weird"
	if got := mustSpec(t, in).Process.User; got.UID != 7 || got.GID != 8 {
		t.Errorf("user = %+v, want 7:8 from the rootfs's file", got)
	}
}

func TestNamespaces(t *testing.T) {
	in := base(t)
	s := mustSpec(t, in)
	want := []specs.LinuxNamespace{{Type: "mount"}, {Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network", Path: in.NetNSPath}}
	if !reflect.DeepEqual(s.Linux.Namespaces, want) {
		t.Errorf("namespaces = %+v, want %+v", s.Linux.Namespaces, want)
	}
	if s.Hostname != "web-0" {
		t.Errorf("hostname = %q", s.Hostname)
	}

	in.NetNSPath = ""
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE, Network: runtimeapi.NamespaceMode_NODE}}}
	s = mustSpec(t, in)
	want = []specs.LinuxNamespace{{Type: "mount"}}
	if !reflect.DeepEqual(s.Linux.Namespaces, want) {
		t.Errorf("host namespaces = %+v, want %+v", s.Linux.Namespaces, want)
	}
	if s.Hostname != "" {
		t.Errorf("host network hostname = %q, want the host's (unset)", s.Hostname)
	}

	// TARGET joins another container's pid namespace; without its path the spec is refused.
	in = base(t)
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "c1"}}}
	if _, err := Spec(in); err == nil {
		t.Error("Spec with pid TARGET and no target namespace succeeded")
	}
	in.TargetPIDNamespace = "/proc/42/ns/pid"
	s = mustSpec(t, in)
	want = []specs.LinuxNamespace{{Type: "mount"}, {Type: "pid", Path: "/proc/42/ns/pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network", Path: in.NetNSPath}}
	if !reflect.DeepEqual(s.Linux.Namespaces, want) {
		t.Errorf("target namespaces = %+v, want %+v", s.Linux.Namespaces, want)
	}

	// POD shares the pod's pid namespace (shareProcessNamespace), and the pod's IPC
	// namespace is joined unless the container uses the host's.
	in = base(t)
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD}}}
	in.PodPIDNamespace, in.IPCNamespace = "/proc/7/ns/pid", "/sb/ipc"
	s = mustSpec(t, in)
	want = []specs.LinuxNamespace{{Type: "mount"}, {Type: "pid", Path: "/proc/7/ns/pid"}, {Type: "ipc", Path: "/sb/ipc"}, {Type: "uts"}, {Type: "network", Path: in.NetNSPath}}
	if !reflect.DeepEqual(s.Linux.Namespaces, want) {
		t.Errorf("pod namespaces = %+v, want %+v", s.Linux.Namespaces, want)
	}
	in.Container.Linux.SecurityContext.NamespaceOptions.Ipc = runtimeapi.NamespaceMode_NODE
	s = mustSpec(t, in)
	for _, n := range s.Linux.Namespaces {
		if n.Type == "ipc" {
			t.Errorf("host IPC: the spec has an ipc namespace %+v", n)
		}
	}
}

func TestSandboxShm(t *testing.T) {
	in := base(t)
	in.SandboxFiles.Shm = "/sb/shm"
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{ReadonlyRootfs: true}}
	s := mustSpec(t, in)
	var shm []specs.Mount
	for _, m := range s.Mounts {
		if m.Destination == "/dev/shm" {
			shm = append(shm, m)
		}
	}
	want := []specs.Mount{{Destination: "/dev/shm", Type: "bind", Source: "/sb/shm", Options: []string{"rbind", "rprivate", "rw", "nosuid", "nodev", "noexec"}}}
	if !reflect.DeepEqual(shm, want) {
		t.Errorf("/dev/shm mounts = %+v, want the pod's shm bound writable (once)", shm)
	}
	// A CRI mount of /dev/shm wins.
	in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "/dev/shm", HostPath: "/host/shm"}}
	s = mustSpec(t, in)
	for _, m := range s.Mounts {
		if m.Destination == "/dev/shm" && m.Source != "/host/shm" {
			t.Errorf("the CRI mount of /dev/shm lost to %+v", m)
		}
	}
}

func TestResources(t *testing.T) {
	in := base(t)
	in.MaxOOMScoreAdj = 0
	s := mustSpec(t, in)
	if s.Linux.Resources.CPU != nil || s.Linux.Resources.Memory != nil {
		t.Errorf("no resources asked, got cpu %+v memory %+v", s.Linux.Resources.CPU, s.Linux.Resources.Memory)
	}
	if s.Linux.CgroupsPath != "/kubette/poduid-1/c1" {
		t.Errorf("cgroups path = %q", s.Linux.CgroupsPath)
	}
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 64 << 20,
		OomScoreAdj: -997, CpusetCpus: "0", CpusetMems: "0",
	}}
	s = mustSpec(t, in)
	r := s.Linux.Resources
	if *r.CPU.Shares != 512 || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || r.CPU.Cpus != "0" || r.CPU.Mems != "0" {
		t.Errorf("cpu = %+v", r.CPU)
	}
	if *r.Memory.Limit != 64<<20 || *r.Memory.Swap != 64<<20 {
		t.Errorf("memory = %+v", r.Memory)
	}
	if *s.Process.OOMScoreAdj != 0 {
		t.Errorf("oom score adj -997 with our own at 0 = %d, want clamped to 0", *s.Process.OOMScoreAdj)
	}
	in.Container.Linux.Resources.OomScoreAdj = 1000
	if got := *mustSpec(t, in).Process.OOMScoreAdj; got != 1000 {
		t.Errorf("oom score adj 1000 = %d", got)
	}
	in.MaxOOMScoreAdj = 500
	in.Container.Linux.Resources.OomScoreAdj = 100
	if got := *mustSpec(t, in).Process.OOMScoreAdj; got != 500 {
		t.Errorf("oom score adj 100 with our own at 500 = %d, want 500", got)
	}
	want := []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
	if !reflect.DeepEqual(r.Devices, want) {
		t.Errorf("devices = %+v", r.Devices)
	}
}

func TestRlimits(t *testing.T) {
	in := base(t)
	want := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1048576, Soft: 1048576}}
	if got := mustSpec(t, in).Process.Rlimits; !reflect.DeepEqual(got, want) {
		t.Errorf("rlimits = %+v", got)
	}
	in.MaxNOFILE = 20000
	want = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 20000, Soft: 20000}}
	if got := mustSpec(t, in).Process.Rlimits; !reflect.DeepEqual(got, want) {
		t.Errorf("clamped rlimits = %+v", got)
	}
}

func TestCapabilities(t *testing.T) {
	sc := func(add, drop []string, priv bool) *runtimeapi.LinuxContainerSecurityContext {
		return &runtimeapi.LinuxContainerSecurityContext{Privileged: priv, Capabilities: &runtimeapi.Capability{AddCapabilities: add, DropCapabilities: drop}}
	}
	for _, tc := range []struct {
		name    string
		sc      *runtimeapi.LinuxContainerSecurityContext
		host    []string
		want    []string
		wantErr bool
	}{
		{name: "default", want: DefaultCapabilities()},
		{name: "add without prefix, drop with", sc: sc([]string{"net_admin", "CAP_SYS_TIME", "CHOWN"}, []string{"CAP_KILL", "MKNOD"}, false),
			want: []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE", "CAP_NET_ADMIN", "CAP_SYS_TIME"}},
		{name: "drop all add one", sc: sc([]string{"NET_BIND_SERVICE"}, []string{"ALL"}, false), want: []string{"CAP_NET_BIND_SERVICE"}},
		{name: "drop all", sc: sc(nil, []string{"all"}, false), want: []string{}},
		{name: "add all", sc: sc([]string{"ALL"}, nil, false), host: []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}, want: []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}},
		{name: "add all drop one", sc: sc([]string{"ALL"}, []string{"SYS_ADMIN"}, false), host: []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}, want: []string{"CAP_CHOWN"}},
		{name: "privileged gets the host's", sc: sc(nil, []string{"ALL"}, true), host: []string{"CAP_CHOWN", "CAP_BPF"}, want: []string{"CAP_CHOWN", "CAP_BPF"}},
		{name: "privileged without host list", sc: sc(nil, nil, true), want: AllCapabilities()},
		{name: "unknown", sc: sc([]string{"CAP_FLY"}, nil, false), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: tc.sc.GetPrivileged()}}
			in.HostCapabilities = tc.host
			in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: tc.sc}
			s, err := Spec(in)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := s.Process.Capabilities
			for name, got := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted} {
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s = %q, want %q", name, got, tc.want)
				}
			}
			if len(c.Inheritable) != 0 || len(c.Ambient) != 0 {
				t.Errorf("inheritable %q ambient %q, want none", c.Inheritable, c.Ambient)
			}
		})
	}
	in := base(t)
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		Capabilities: &runtimeapi.Capability{AddAmbientCapabilities: []string{"NET_BIND_SERVICE"}}}}
	c := mustSpec(t, in).Process.Capabilities
	if !reflect.DeepEqual(c.Ambient, []string{"CAP_NET_BIND_SERVICE"}) || !reflect.DeepEqual(c.Inheritable, []string{"CAP_NET_BIND_SERVICE"}) {
		t.Errorf("ambient %q inheritable %q", c.Ambient, c.Inheritable)
	}
}

func TestPrivilegedAndPaths(t *testing.T) {
	in := base(t)
	s := mustSpec(t, in)
	if !reflect.DeepEqual(s.Linux.MaskedPaths, defaultMaskedPaths()) || !reflect.DeepEqual(s.Linux.ReadonlyPaths, defaultReadonlyPaths()) {
		t.Errorf("masked %q readonly %q, want the defaults", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	if mountByDst(s, "/sys").Options[3] != "ro" || mountByDst(s, "/sys/fs/cgroup").Options[4] != "ro" {
		t.Errorf("/sys or cgroup not read-only: %+v %+v", mountByDst(s, "/sys"), mountByDst(s, "/sys/fs/cgroup"))
	}
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		MaskedPaths: []string{"/proc/kcore"}, ReadonlyPaths: []string{"/proc/sys"}, ReadonlyRootfs: true, NoNewPrivs: true}}
	s = mustSpec(t, in)
	if !reflect.DeepEqual(s.Linux.MaskedPaths, []string{"/proc/kcore"}) || !reflect.DeepEqual(s.Linux.ReadonlyPaths, []string{"/proc/sys"}) {
		t.Errorf("CRI masked %q readonly %q", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	if !s.Root.Readonly || !s.Process.NoNewPrivileges {
		t.Errorf("readonly rootfs %v, no new privileges %v", s.Root.Readonly, s.Process.NoNewPrivileges)
	}
	in.Container.Linux.SecurityContext.Privileged = true
	if _, err := Spec(in); err == nil {
		t.Error("privileged container in an unprivileged sandbox: want an error")
	}
	in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}}
	s = mustSpec(t, in)
	if s.Linux.MaskedPaths != nil || s.Linux.ReadonlyPaths != nil {
		t.Errorf("privileged: masked %q readonly %q, want none", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	if mountByDst(s, "/sys").Options[3] != "rw" || !reflect.DeepEqual(s.Linux.Resources.Devices, []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}) {
		t.Errorf("privileged: /sys %+v devices %+v", mountByDst(s, "/sys"), s.Linux.Resources.Devices)
	}
	if s.Process.Terminal {
		t.Error("terminal must be false")
	}
}

func mountByDst(s *specs.Spec, dst string) specs.Mount {
	for _, m := range s.Mounts {
		if m.Destination == dst {
			return m
		}
	}
	return specs.Mount{}
}

func TestMounts(t *testing.T) {
	in := base(t)
	in.SandboxFiles.Hostname = "/sb/hostname"
	in.SandboxFiles.Hosts = "/sb/hosts"
	in.SandboxFiles.ResolvConf = "/sb/resolv.conf"
	in.Container.Mounts = []*runtimeapi.Mount{
		{ContainerPath: "/data/sub", HostPath: "/h/sub", Readonly: true},
		{ContainerPath: "/data", HostPath: "/h/data", Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ContainerPath: "/etc/hosts", HostPath: "/kubelet/etc-hosts"},
		{ContainerPath: "/dev/shm", HostPath: "/h/shm"},
	}
	s := mustSpec(t, in)
	var got []string
	for _, m := range s.Mounts {
		got = append(got, m.Destination+" "+m.Source+" "+strings.Join(m.Options, ","))
	}
	want := []string{
		"/proc proc nosuid,noexec,nodev",
		"/dev tmpfs nosuid,strictatime,mode=755,size=65536k",
		"/dev/pts devpts nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5",
		"/dev/mqueue mqueue nosuid,noexec,nodev",
		"/sys sysfs nosuid,noexec,nodev,ro",
		"/sys/fs/cgroup cgroup nosuid,noexec,nodev,relatime,ro",
		"/data /h/data rbind,rslave,rw",
		"/data/sub /h/sub rbind,rprivate,ro",
		"/etc/hosts /kubelet/etc-hosts rbind,rprivate,rw",
		"/dev/shm /h/shm rbind,rprivate,rw",
		"/etc/hostname /sb/hostname rbind,rprivate,rw",
		"/etc/resolv.conf /sb/resolv.conf rbind,rprivate,rw",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s.Linux.RootfsPropagation != "rslave" {
		t.Errorf("rootfs propagation = %q, want rslave", s.Linux.RootfsPropagation)
	}
	in.Container.Mounts = append(in.Container.Mounts, &runtimeapi.Mount{ContainerPath: "/shared", HostPath: "/h/shared", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL})
	s = mustSpec(t, in)
	if s.Linux.RootfsPropagation != "rshared" || mountByDst(s, "/shared").Options[1] != "rshared" {
		t.Errorf("bidirectional: rootfs propagation %q, mount %+v", s.Linux.RootfsPropagation, mountByDst(s, "/shared"))
	}
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{ReadonlyRootfs: true}}
	if m := mountByDst(mustSpec(t, in), "/etc/resolv.conf"); m.Options[2] != "ro" {
		t.Errorf("read-only rootfs: resolv.conf %+v, want ro", m)
	}
	// A CRI /dev or /sys replaces the default mounts below it.
	in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "/dev", HostPath: "/h/dev"}, {ContainerPath: "/sys/", HostPath: "/h/sys"}}
	got = nil
	for _, m := range mustSpec(t, in).Mounts {
		got = append(got, m.Destination)
	}
	if want := []string{"/proc", "/dev", "/sys", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf"}; !reflect.DeepEqual(got, want) {
		t.Errorf("with CRI /dev and /sys: mounts %q, want %q", got, want)
	}
	in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "relative", HostPath: "/x"}}
	if _, err := Spec(in); err == nil {
		t.Error("relative mount destination: want an error")
	}
}

func TestAnnotationsAndSysctls(t *testing.T) {
	in := base(t)
	in.Container.Annotations = map[string]string{"a": "b"}
	in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"}}
	s := mustSpec(t, in)
	want := map[string]string{
		"a": "b", "io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.container-name": "web",
		"io.kubernetes.cri.image-name": "localhost:5000/web:v1", "io.kubernetes.cri.sandbox-name": "web-0",
		"io.kubernetes.cri.sandbox-namespace": "default", "io.kubernetes.cri.sandbox-uid": "uid-1",
	}
	if !reflect.DeepEqual(s.Annotations, want) {
		t.Errorf("annotations = %v", s.Annotations)
	}
	if s.Linux.Sysctl["net.ipv4.ip_unprivileged_port_start"] != "0" {
		t.Errorf("sysctls = %v", s.Linux.Sysctl)
	}
	if in.Container.Annotations["io.kubernetes.cri.container-type"] != "" {
		t.Error("Spec changed its input's annotations")
	}
}

func TestRejects(t *testing.T) {
	in := base(t)
	in.Rootfs = "relative/rootfs"
	if _, err := Spec(in); err == nil {
		t.Error("relative rootfs: want an error")
	}
	in = base(t)
	in.Container = nil
	if _, err := Spec(in); err == nil {
		t.Error("nil container: want an error")
	}
}

// TestGolden compares a whole spec with testdata/basic.json (rootfs path normalised).
func TestGolden(t *testing.T) {
	in := base(t)
	in.MaxNOFILE = 20000
	in.SandboxFiles.ResolvConf = "/sb/resolv.conf"
	in.Container.Envs = []*runtimeapi.KeyValue{{Key: "MODE", Value: []byte("prod")}}
	in.Container.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/h/data", Readonly: true}}
	in.Container.Linux = &runtimeapi.LinuxContainerConfig{
		Resources:       &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, CpuQuota: 20000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 1000},
		SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsUsername: "app", Capabilities: &runtimeapi.Capability{DropCapabilities: []string{"NET_RAW"}}},
	}
	s := mustSpec(t, in)
	s.Root.Path = "ROOTFS"
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	goldenfile.Check(t, filepath.Join("testdata", "basic.json"), got)
}

func TestDevices(t *testing.T) {
	in := base(t)
	in.Container.Devices = []*runtimeapi.Device{
		{HostPath: "/dev/null", ContainerPath: "/dev/mynull", Permissions: "rw"},
		{HostPath: "/dev/zero"},
	}
	s := mustSpec(t, in)
	if len(s.Linux.Devices) != 2 {
		t.Fatalf("devices = %+v", s.Linux.Devices)
	}
	null, zero := s.Linux.Devices[0], s.Linux.Devices[1]
	if null.Path != "/dev/mynull" || null.Type != "c" || null.Major != 1 || null.Minor != 3 || *null.FileMode != 0o666 {
		t.Errorf("null = %+v", null)
	}
	if zero.Path != "/dev/zero" || zero.Major != 1 || zero.Minor != 5 {
		t.Errorf("zero = %+v", zero)
	}
	rules := s.Linux.Resources.Devices
	if len(rules) != 3 || rules[0].Allow || !rules[1].Allow || *rules[1].Major != 1 || *rules[1].Minor != 3 || rules[1].Access != "rw" || rules[2].Access != "rwm" {
		t.Errorf("device cgroup rules = %+v", rules)
	}
	in.Container.Devices = []*runtimeapi.Device{{HostPath: "/etc/hostname"}}
	if _, err := Spec(in); err == nil {
		t.Error("a regular file as a device: want an error")
	}
	in.Container.Devices = []*runtimeapi.Device{{HostPath: "/no/such/device"}}
	if _, err := Spec(in); err == nil {
		t.Error("a missing device: want an error")
	}
}

func TestTerminal(t *testing.T) {
	in := base(t)
	in.Container.Tty = true
	s := mustSpec(t, in)
	if !s.Process.Terminal || !slices.Contains(s.Process.Env, "TERM=xterm") {
		t.Errorf("tty: terminal %v env %q, want a terminal and TERM=xterm", s.Process.Terminal, s.Process.Env)
	}
	in.Container.Envs = []*runtimeapi.KeyValue{{Key: "TERM", Value: []byte("vt100")}}
	s = mustSpec(t, in)
	if slices.Contains(s.Process.Env, "TERM=xterm") || !slices.Contains(s.Process.Env, "TERM=vt100") {
		t.Errorf("tty with TERM set: env %q, want TERM=vt100 only", s.Process.Env)
	}
	in.Container.Tty = false
	in.Container.Envs = nil
	s = mustSpec(t, in)
	if s.Process.Terminal || slices.ContainsFunc(s.Process.Env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
		t.Errorf("no tty: terminal %v env %q, want neither", s.Process.Terminal, s.Process.Env)
	}
}
