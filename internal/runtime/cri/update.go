package cri

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateContainerResources changes a container's cgroup limits with `runc update` and
// records them.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	if s.cfg.Runc == "" || s.cfg.RuncRoot == "" {
		return nil, status.Error(codes.Unimplemented, "kubette runtime: updating resources needs runc, which is not configured")
	}
	c, err := s.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r := req.GetLinux()
	if r == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	c.op.Lock()
	defer c.op.Unlock()
	o := s.refresh(ctx, c)
	if s.unborn(c) {
		// Not in runc yet: StartContainer's runc create applies the bundle's resources.
		if err := updateBundleResources(filepath.Join(s.containerDir(c.meta.ID), "bundle", "config.json"), r); err != nil {
			return nil, fmt.Errorf("failed to update the resources of container %s: %w", c.meta.ID, err)
		}
	} else if o.state == runtimeapi.ContainerState_CONTAINER_CREATED || o.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		args := append([]string{"--root", s.cfg.RuncRoot, "update"}, updateArgs(r)...)
		args = append(args, c.meta.ID)
		if out, err := exec.CommandContext(ctx, s.cfg.Runc, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("failed to update the resources of container %s: %w: %s", c.meta.ID, err, out)
		}
	}
	s.mu.Lock()
	cfg := proto.CloneOf(c.cfg)
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	cfg.Linux.Resources = proto.CloneOf(r)
	raw, err := marshalConfig(cfg)
	if err == nil {
		c.cfg = cfg
		c.meta.Config = raw
	}
	s.mu.Unlock()
	if err == nil {
		err = s.persistContainer(c)
	}
	if err != nil {
		return nil, fmt.Errorf("record the resources of container %s: %w", c.meta.ID, err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// updateArgs renders the `runc update` flags of the resources that are set.
func updateArgs(r *runtimeapi.LinuxContainerResources) []string {
	var args []string
	add := func(flag string, v int64) {
		if v > 0 {
			args = append(args, flag, strconv.FormatInt(v, 10))
		}
	}
	add("--cpu-period", r.GetCpuPeriod())
	add("--cpu-quota", r.GetCpuQuota())
	add("--cpu-share", r.GetCpuShares())
	if r.GetMemoryLimitInBytes() > 0 {
		add("--memory", r.GetMemoryLimitInBytes())
		// Keep memory+swap at least as large as memory, or the kernel refuses.
		swap := r.GetMemoryLimitInBytes()
		if r.GetMemorySwapLimitInBytes() > swap {
			swap = r.GetMemorySwapLimitInBytes()
		}
		add("--memory-swap", swap)
	}
	if r.GetCpusetCpus() != "" {
		args = append(args, "--cpuset-cpus", r.GetCpusetCpus())
	}
	if r.GetCpusetMems() != "" {
		args = append(args, "--cpuset-mems", r.GetCpusetMems())
	}
	return args
}
