package kubelet

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Pod-level sysctls (spec.securityContext.sysctls), as upstream's kubelet admits them: a pod may
// set a sysctl only when it is on the node's allowlist, the safe sysctls (namespaced and
// isolated: they affect no other pod) plus what the administrator allowed, and only in a
// namespace the pod does not share with the host. Otherwise the pod is rejected with
// reasonSysctlForbidden before any of it runs.

// reasonSysctlForbidden is the reason of a pod rejected for its sysctls, as upstream's.
const reasonSysctlForbidden = "SysctlForbidden"

// sysctlNamespace is the kernel namespace a sysctl belongs to.
type sysctlNamespace string

const (
	ipcNamespace     sysctlNamespace = "IPC"
	netNamespace     sysctlNamespace = "Net"
	unknownNamespace sysctlNamespace = ""
)

// safeSysctl is a sysctl upstream calls safe, with the kernel release that namespaced it
// (empty: every supported kernel).
type safeSysctl struct{ name, minKernel string }

// safeSysctls is upstream's list (v1.32).
var safeSysctls = [...]safeSysctl{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// ipcSysctls are the sysctls of the IPC namespace known by name (the kernel's semaphore,
// shared memory and message queue limits).
var ipcSysctls = map[string]bool{
	"kernel.sem": true, "kernel.shmall": true, "kernel.shmmax": true, "kernel.shmmni": true,
	"kernel.shm_rmid_forced": true, "kernel.shm": true,
	"kernel.msgmax": true, "kernel.msgmnb": true, "kernel.msgmni": true, "kernel.msg": true,
}

// namespaceOfSysctl is the namespace of a sysctl in dotted form, unknownNamespace when it is
// not known to be namespaced.
func namespaceOfSysctl(name string) sysctlNamespace {
	switch {
	case ipcSysctls[name]:
		return ipcNamespace
	case strings.HasPrefix(name, "net."):
		return netNamespace
	case strings.HasPrefix(name, "fs.mqueue."):
		return ipcNamespace
	}
	return unknownNamespace
}

// normalizeSysctl turns a sysctl written with slashes ("net/ipv4/conf/eth0.100/rp_filter")
// into the dotted form ("net.ipv4.conf.eth0/100.rp_filter"); a dotted one stays as it is.
func normalizeSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

// sysctlPattern is what an allowed-unsafe-sysctls entry must look like, as upstream's: a
// sysctl name (with "." or "/" separators), or a prefix of one ending in "*".
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// sysctlAllowlist says which sysctls pods may set: exact names and prefixes (patterns ending
// in "*"), each with its namespace.
type sysctlAllowlist struct {
	names, prefixes map[string]sysctlNamespace
}

// newSysctlAllowlist builds the allowlist of the safe sysctls the running kernel (release
// "major.minor...") namespaces and the patterns the administrator allowed. A pattern that
// is malformed or not known to be namespaced is an error, as upstream.
func newSysctlAllowlist(kernelRelease string, unsafe []string) (*sysctlAllowlist, error) {
	w := &sysctlAllowlist{names: map[string]sysctlNamespace{}, prefixes: map[string]sysctlNamespace{}}
	for _, s := range safeSysctls {
		if s.minKernel == "" || kernelAtLeast(kernelRelease, s.minKernel) {
			w.names[s.name] = namespaceOfSysctl(s.name)
		}
	}
	for _, p := range unsafe {
		if len(p) > 253 || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most 253 characters and match regex %s", p, sysctlPattern)
		}
		name := normalizeSysctl(p)
		prefixed := false
		if i := strings.IndexByte(name, '*'); i >= 0 {
			name, prefixed = name[:i], true
		}
		ns := namespaceOfSysctl(name)
		if ns == unknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", name)
		}
		if prefixed {
			w.prefixes[name] = ns
		} else {
			w.names[name] = ns
		}
	}
	return w, nil
}

// check tells why a pod may not set the sysctl, or nil when it may.
func (w *sysctlAllowlist) check(sysctl string, hostNet, hostIPC bool) error {
	sysctl = normalizeSysctl(sysctl)
	ns, found := w.names[sysctl]
	if !found {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(sysctl, p) {
				ns, found = pns, true
				break
			}
		}
	}
	switch {
	case !found:
		return fmt.Errorf("%q not allowlisted", sysctl)
	case ns == ipcNamespace && hostIPC, ns == netNamespace && hostNet:
		return fmt.Errorf("%q not allowed with host %s enabled", sysctl, ns)
	}
	return nil
}

// admitSysctls is the admission of a pod's sysctls: "" when the pod may run, else the
// rejection's reason and message.
func (w *sysctlAllowlist) admitSysctls(pod *v1.Pod) (reason, message string) {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return "", ""
	}
	for _, s := range sc.Sysctls {
		if err := w.check(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return reasonSysctlForbidden, "forbidden sysctl: " + err.Error()
		}
	}
	return "", ""
}

// kernelAtLeast compares a kernel release ("6.1.0-13-amd64") with "major.minor"; an
// unreadable release is older than every version.
func kernelAtLeast(release, min string) bool {
	have, ok1 := majorMinor(release)
	want, ok2 := majorMinor(min)
	if !ok1 || !ok2 {
		return false
	}
	return have[0] > want[0] || (have[0] == want[0] && have[1] >= want[1])
}

func majorMinor(v string) ([2]int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return [2]int{}, false
	}
	return [2]int{major, mi}, true
}

// kernelRelease is the running kernel's release, "" when it cannot be read.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
