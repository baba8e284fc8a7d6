package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kubette/kubette/internal/hostaddr"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// memInfo returns MemTotal and MemAvailable from /proc/meminfo, in bytes.
func memInfo() (total, available uint64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("read /proc/meminfo: %w", err)
	}
	return parseMemInfo(data)
}

// parseMemInfo reads MemTotal and MemAvailable (kB) from the text of /proc/meminfo.
func parseMemInfo(data []byte) (total, available uint64, err error) {
	var haveTotal bool
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		n, perr := strconv.ParseUint(fields[0], 10, 64)
		if perr != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n *= 1024
		}
		switch name {
		case "MemTotal":
			total, haveTotal = n, true
		case "MemAvailable":
			available = n
		}
	}
	if !haveTotal {
		return 0, 0, fmt.Errorf("/proc/meminfo has no MemTotal")
	}
	return total, available, nil
}

// fsInfo returns the size, the bytes available to unprivileged users, and the free and total
// inodes of the filesystem holding dir.
func fsInfo(dir string) (size, avail, inodesFree, inodes uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return st.Blocks * bs, st.Bavail * bs, st.Ffree, st.Files, nil
}

// osImage returns PRETTY_NAME from /etc/os-release (or "Linux").
func osImage() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	return parseOSRelease(data)
}

func parseOSRelease(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && k == "PRETTY_NAME" {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return "Linux"
}

// firstLine returns the trimmed content of a small file, or "" when it cannot be read.
func firstLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(line)
}

// kernelVersion is uname -r.
func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// DefaultAddresses returns the node's InternalIP (the first IPv4 address of the interface
// that holds the default route) and its Hostname.
func DefaultAddresses(nodeName string) []v1.NodeAddress {
	var out []v1.NodeAddress
	if ip, err := hostaddr.DefaultRouteIPv4(); err == nil {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: nodeName})
}
