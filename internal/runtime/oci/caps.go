package oci

import (
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AllCapabilities are the Linux capabilities this package knows, in kernel order.
func AllCapabilities() []string {
	return []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
		"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
		"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
		"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
		"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
		"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
		"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
	}
}

// DefaultCapabilities are the capabilities a container gets unless its security context says
// otherwise (containerd's and Docker's default set).
func DefaultCapabilities() []string {
	return []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
		"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	}
}

// capName normalises "net_admin", "NET_ADMIN" and "CAP_NET_ADMIN" to "CAP_NET_ADMIN".
func capName(s string) (string, error) {
	n := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	for _, c := range AllCapabilities() {
		if c == n {
			return n, nil
		}
	}
	return "", fmt.Errorf("oci spec: unknown capability %q", s)
}

func hasAll(list []string) bool {
	for _, s := range list {
		if strings.EqualFold(strings.TrimSpace(s), "ALL") {
			return true
		}
	}
	return false
}

// capabilities applies the security context as containerd does: privileged or add "ALL" give
// every capability the runtime holds, drop "ALL" empties the set, then the named ones are added
// and dropped. The same set goes into bounding, effective and permitted; inheritable stays empty
// (CVE-2022-24769) but for the add_ambient_capabilities, which go into ambient.
func capabilities(c *runtimeapi.Capability, privileged bool, host []string) (*specs.LinuxCapabilities, error) {
	all := host
	if all == nil {
		all = AllCapabilities()
	}
	set := DefaultCapabilities()
	switch {
	case privileged || hasAll(c.GetAddCapabilities()):
		set = append([]string(nil), all...)
	}
	if !privileged {
		if hasAll(c.GetDropCapabilities()) {
			set = nil
		}
		for _, a := range c.GetAddCapabilities() {
			if strings.EqualFold(strings.TrimSpace(a), "ALL") {
				continue
			}
			n, err := capName(a)
			if err != nil {
				return nil, err
			}
			if !contains(set, n) {
				set = append(set, n)
			}
		}
		for _, d := range c.GetDropCapabilities() {
			if strings.EqualFold(strings.TrimSpace(d), "ALL") {
				continue
			}
			n, err := capName(d)
			if err != nil {
				return nil, err
			}
			set = remove(set, n)
		}
	}
	var ambient []string
	for _, a := range c.GetAddAmbientCapabilities() {
		n, err := capName(a)
		if err != nil {
			return nil, err
		}
		if !contains(ambient, n) {
			ambient = append(ambient, n)
		}
	}
	if set == nil {
		set = []string{}
	}
	return &specs.LinuxCapabilities{
		Bounding:  set,
		Effective: slices.Clone(set),
		Permitted: slices.Clone(set),
		// The kernel keeps an ambient capability only while it is also inheritable.
		Inheritable: append([]string(nil), ambient...),
		Ambient:     ambient,
	}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
