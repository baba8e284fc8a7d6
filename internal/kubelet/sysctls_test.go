package kubelet

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSysctlAllowlist(t *testing.T) {
	w, err := newSysctlAllowlist("6.1.0-13-amd64", []string{"kernel.msg*", "net.core.somaxconn", "fs/mqueue/*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		hostNet, hostIPC bool
		want             string // "" allowed
	}{
		{"kernel.shm_rmid_forced", false, false, ""},
		{"kernel/shm_rmid_forced", false, false, ""},
		{"kernel.shm_rmid_forced", false, true, `"kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{"net.ipv4.ip_local_port_range", false, false, ""},
		{"net.ipv4.ip_local_port_range", true, false, `"net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{"net.ipv4.tcp_rmem", false, false, ""},
		{"kernel.msgmax", false, false, ""},
		{"kernel.msgmax", false, true, `"kernel.msgmax" not allowed with host IPC enabled`},
		{"fs.mqueue.msg_max", false, false, ""},
		{"net.core.somaxconn", false, false, ""},
		{"net.core.rmem_max", false, false, `"net.core.rmem_max" not allowlisted`},
		{"kernel.shmmax", false, false, `"kernel.shmmax" not allowlisted`},
		{"net/ipv4/conf/eth0.100/rp_filter", false, false, `"net.ipv4.conf.eth0/100.rp_filter" not allowlisted`},
	} {
		err := w.check(tc.name, tc.hostNet, tc.hostIPC)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("check(%q, net=%v, ipc=%v) = %q, want %q", tc.name, tc.hostNet, tc.hostIPC, got, tc.want)
		}
	}
}

func TestSysctlAllowlistKernelVersions(t *testing.T) {
	old, err := newSysctlAllowlist("4.4.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if old.check("net.ipv4.tcp_keepalive_time", false, false) == nil || old.check("net.ipv4.ip_local_reserved_ports", false, false) != nil {
		t.Error("on 4.4 tcp_keepalive_time (4.5) is not namespaced, ip_local_reserved_ports (3.16) is")
	}
	unknown, err := newSysctlAllowlist("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if unknown.check("net.ipv4.ip_local_reserved_ports", false, false) == nil || unknown.check("kernel.shm_rmid_forced", false, false) != nil {
		t.Error("with an unknown kernel only the unversioned safe sysctls are allowed")
	}
}

func TestSysctlAllowlistRejectsBadPatterns(t *testing.T) {
	for _, p := range []string{"kernel.panic", "vm.*", "Net.core", "net..core", "-net.core", "a*b"} {
		if _, err := newSysctlAllowlist("6.1", []string{p}); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
}

func TestNormalizeSysctl(t *testing.T) {
	for in, want := range map[string]string{
		"kernel.shm_rmid_forced":           "kernel.shm_rmid_forced",
		"kernel/shm_rmid_forced":           "kernel.shm_rmid_forced",
		"net/ipv4/conf/eth0.100/rp_filter": "net.ipv4.conf.eth0/100.rp_filter",
		"net.ipv4.conf.eth0/100.rp_filter": "net.ipv4.conf.eth0/100.rp_filter",
		"kernel":                           "kernel",
	} {
		if got := normalizeSysctl(in); got != want {
			t.Errorf("normalizeSysctl(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release, min string
		want         bool
	}{
		{"6.18.44-fc-v657", "4.15", true}, {"4.15.0", "4.15", true}, {"4.5-rc1", "4.6", false},
		{"3.16", "4.5", false}, {"5.4", "4.15", true}, {"", "3.16", false}, {"garbage", "3.16", false},
	} {
		if got := kernelAtLeast(tc.release, tc.min); got != tc.want {
			t.Errorf("kernelAtLeast(%q, %q) = %v", tc.release, tc.min, got)
		}
	}
}

// A pod asking for a sysctl the node does not allow is rejected before anything of it runs:
// phase Failed, upstream's reason and message, and a Warning event.
func TestSyncRejectsForbiddenSysctls(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel.shmmax", Value: "100000000"}}},
		Containers:      []v1.Container{containerNamed("a", "img")},
	}})
	p := h.sync(pod)
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != reasonSysctlForbidden ||
		p.Status.Message != `Pod was rejected: forbidden sysctl: "kernel.shmmax" not allowlisted` {
		t.Fatalf("status: %s %q %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if len(h.rt.Sandboxes) != 0 || h.container(pod, "a") != nil {
		t.Error("a rejected pod must not run")
	}
	ev := strings.Join(h.events(), "\n")
	if !strings.Contains(ev, `Warning SysctlForbidden forbidden sysctl: "kernel.shmmax" not allowlisted`) {
		t.Errorf("events:\n%s", ev)
	}
	p = h.sync(p)
	if p.Status.Phase != v1.PodFailed || len(h.rt.Sandboxes) != 0 {
		t.Error("a rejected pod stays failed and does not run")
	}
}

// A safe sysctl is admitted and reaches the runtime in dotted form in the sandbox config.
func TestSyncPassesSafeSysctlsToTheSandbox(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy:   v1.RestartPolicyNever,
		SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}}},
		Containers:      []v1.Container{containerNamed("a", "img")},
	}})
	p := h.sync(pod)
	if p.Status.Phase == v1.PodFailed || h.container(pod, "a") == nil {
		t.Fatalf("pod with a safe sysctl did not start: %s %q", p.Status.Phase, p.Status.Message)
	}
	cfg, err := h.k.sandboxConfig(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GetLinux().GetSysctls(); len(got) != 1 || got["kernel.shm_rmid_forced"] != "1" {
		t.Errorf("sandbox sysctls %v", got)
	}
}

// Config.AllowedUnsafeSysctls widens the allowlist; a pattern that is not namespaced makes
// New fail.
func TestConfigAllowedUnsafeSysctls(t *testing.T) {
	h := newHarness(t)
	cfg := h.k.cfg
	cfg.AllowedUnsafeSysctls = []string{"kernel.panic"}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), `the sysctls "kernel.panic" are not known to be namespaced`) {
		t.Errorf("New with kernel.panic allowed: %v", err)
	}
	cfg.AllowedUnsafeSysctls = []string{"kernel.shm*"}
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shmmax", Value: "1"}}}}}
	if reason, msg := k.sysctls.admitSysctls(pod); reason != "" {
		t.Errorf("kernel.shmmax with kernel.shm* allowed: %s %s", reason, msg)
	}
}
