package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// CgroupNode returns a NodeReader over the node's root cgroup below cgroupRoot (usually
// /sys/fs/cgroup) and procRoot (/proc), with the filesystem of fsDir (the kubelet's data
// directory; "" leaves Fs out). On cgroup v1 the CPU time is cpuacct/cpuacct.usage and the
// memory memory/memory.usage_in_bytes with total_inactive_file and total_rss of memory.stat;
// on cgroup v2 (cgroup.controllers at the root) the CPU time is usage_usec of the root's
// cpu.stat and the memory, which the root cgroup does not account, comes from
// /proc/meminfo (MemTotal - MemFree as usage, minus Inactive(file) as the working set).
// availableBytes is MemTotal minus the working set, as upstream's.
func CgroupNode(cgroupRoot, procRoot, fsDir string) NodeReader {
	return func() (NodeSample, error) {
		s := NodeSample{Time: time.Now()}
		meminfo := readKV(filepath.Join(procRoot, "meminfo"), 1024)
		if btime, ok := readKV(filepath.Join(procRoot, "stat"), 1)["btime"]; ok {
			s.StartTime = time.Unix(int64(btime), 0)
		}
		if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
			if usec, ok := readKV(filepath.Join(cgroupRoot, "cpu.stat"), 1)["usage_usec"]; ok {
				s.CPUUsageCoreNanoSeconds = uintPtr(usec * 1000)
			}
			total, free := meminfo["MemTotal"], meminfo["MemFree"]
			if total > 0 && free <= total {
				usage := total - free
				s.UsageBytes = uintPtr(usage)
				s.WorkingSetBytes = uintPtr(sub(usage, meminfo["Inactive(file)"]))
				s.RSSBytes = uintPtr(meminfo["AnonPages"])
			}
		} else {
			if v, ok := readUint(filepath.Join(cgroupRoot, "cpuacct", "cpuacct.usage")); ok {
				s.CPUUsageCoreNanoSeconds = uintPtr(v)
			}
			memDir := filepath.Join(cgroupRoot, "memory")
			if usage, ok := readUint(filepath.Join(memDir, "memory.usage_in_bytes")); ok {
				stat := readKV(filepath.Join(memDir, "memory.stat"), 1)
				s.UsageBytes = uintPtr(usage)
				s.WorkingSetBytes = uintPtr(sub(usage, stat["total_inactive_file"]))
				s.RSSBytes = uintPtr(stat["total_rss"])
			}
		}
		if s.WorkingSetBytes != nil && meminfo["MemTotal"] > 0 {
			s.AvailableBytes = uintPtr(sub(meminfo["MemTotal"], *s.WorkingSetBytes))
		}
		if fsDir != "" {
			s.Fs = statFs(fsDir, s.Time)
		}
		if s.CPUUsageCoreNanoSeconds == nil && s.WorkingSetBytes == nil {
			return s, fmt.Errorf("node stats: no CPU or memory figures below %s", cgroupRoot)
		}
		return s, nil
	}
}

// statFs reports the usage of the filesystem holding dir (nil if it cannot be read).
func statFs(dir string, at time.Time) *statsapi.FsStats {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	capacity, avail := st.Blocks*bs, st.Bavail*bs
	used := sub(st.Blocks, st.Bfree) * bs
	return &statsapi.FsStats{Time: metav1.NewTime(at), CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
		Inodes: uintPtr(st.Files), InodesFree: uintPtr(st.Ffree), InodesUsed: uintPtr(sub(st.Files, st.Ffree))}
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readKV parses "key value [unit]" lines (cgroup stat files, /proc/meminfo with its "key:"
// and kB, /proc/stat), multiplying each value by scale.
func readKV(path string, scale uint64) map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[strings.TrimSuffix(f[0], ":")] = n * scale
		}
	}
	return out
}
