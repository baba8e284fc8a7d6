package cri

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStats reports one container's CPU, memory and writable layer usage.
func (s *Server) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.stats(c)}, nil
}

// ListContainerStats reports the stats of the containers matching the filter.
func (s *Server) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	resp := &runtimeapi.ListContainerStatsResponse{Stats: []*runtimeapi.ContainerStats{}}
	for _, c := range s.containerList() {
		s.mu.Lock()
		m, cfg := c.meta, c.cfg
		s.mu.Unlock()
		if !hasPrefix(m.ID, f.GetId()) || !hasPrefix(m.SandboxID, f.GetPodSandboxId()) || !matchLabels(cfg.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		resp.Stats = append(resp.Stats, s.stats(c))
	}
	return resp, nil
}

// stats reads c's cgroup v1 files (cpuacct.usage; memory usage minus inactive file pages
// for the working set) and sums its writable layer; what cannot be read is left out.
func (s *Server) stats(c *container) *runtimeapi.ContainerStats {
	s.mu.Lock()
	m, cfg := c.meta, c.cfg
	s.mu.Unlock()
	now := time.Now().UnixNano()
	st := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: m.ID, Metadata: cfg.GetMetadata(), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations()}}
	if m.Final != nil {
		return st
	}
	if v, ok := readUint(filepath.Join(s.cfg.CgroupRoot, "cpuacct", m.CgroupsPath, "cpuacct.usage")); ok {
		st.Cpu = &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: v}}
	}
	memDir := filepath.Join(s.cfg.CgroupRoot, "memory", m.CgroupsPath)
	if usage, ok := readUint(filepath.Join(memDir, "memory.usage_in_bytes")); ok {
		stat := readStat(filepath.Join(memDir, "memory.stat"))
		ws := usage
		if inactive := stat["total_inactive_file"]; inactive < ws {
			ws -= inactive
		} else {
			ws = 0
		}
		st.Memory = &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws},
			UsageBytes: &runtimeapi.UInt64Value{Value: usage}, RssBytes: &runtimeapi.UInt64Value{Value: stat["total_rss"]},
			PageFaults: &runtimeapi.UInt64Value{Value: stat["total_pgfault"]}, MajorPageFaults: &runtimeapi.UInt64Value{Value: stat["total_pgmajfault"]}}
	}
	upper, fsDir := filepath.Join(s.writableDir(m.ID), "upper"), s.writablesDir()
	if _, err := os.Lstat(upper); errors.Is(err, os.ErrNotExist) {
		// A container created by a kubette that kept upper/ in the container directory.
		upper, fsDir = filepath.Join(s.containerDir(m.ID), "upper"), s.containersDir()
	}
	if bytes, inodes, ok := dirUsage(upper); ok {
		st.WritableLayer = &runtimeapi.FilesystemUsage{Timestamp: now, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: fsDir},
			UsedBytes: &runtimeapi.UInt64Value{Value: bytes}, InodesUsed: &runtimeapi.UInt64Value{Value: inodes}}
	}
	return st
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readStat parses a cgroup "key value" file.
func readStat(path string) map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// dirUsage sums the sizes and counts the inodes below dir.
func dirUsage(dir string) (bytes, inodes uint64, ok bool) {
	if _, err := os.Lstat(dir); err != nil {
		return 0, 0, false
	}
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			bytes += uint64(info.Size())
		}
		return nil
	})
	return bytes, inodes, true
}
