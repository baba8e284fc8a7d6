package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

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
	if ip, err := defaultRouteIPv4(); err == nil {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: nodeName})
}

// defaultRouteIPv4 reads /proc/net/route for the default route's interface and returns its
// first IPv4 address.
func defaultRouteIPv4() (net.IP, error) {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("read /proc/net/route: %w", err)
	}
	iface, err := defaultRouteInterface(data)
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.To4(), nil
		}
	}
	return nil, fmt.Errorf("interface %s has no IPv4 address", iface)
}

// defaultRouteInterface finds the interface of the default route (destination and mask 0)
// with the lowest metric in the text of /proc/net/route.
func defaultRouteInterface(data []byte) (string, error) {
	best, bestMetric := "", uint64(0)
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		metric, err := strconv.ParseUint(f[6], 10, 64)
		if err != nil {
			continue
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if best == "" {
		return "", fmt.Errorf("no default route")
	}
	return best, nil
}
