package cri

import (
	"context"
	"fmt"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeName is the name Version reports.
const RuntimeName = "kubette"

// Version reports the runtime's name and version.
func (s *Server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: RuntimeName, RuntimeVersion: s.cfg.Version, RuntimeApiVersion: "v1"}, nil
}

// Status reports RuntimeReady and NetworkReady (false with NetworkPluginNotReady until the
// network is ready), and the runtime handlers served: the default "" and Config.Handlers.
func (s *Server) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	netCond := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if err := s.cfg.Network.Ready(); err != nil {
		netCond.Status = false
		netCond.Reason = "NetworkPluginNotReady"
		netCond.Message = fmt.Sprintf("Network plugin returns error: %v", err)
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, netCond,
	}}}
	for _, h := range append([]string{""}, s.cfg.Handlers...) {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: h, Features: &runtimeapi.RuntimeHandlerFeatures{}})
	}
	return resp, nil
}

// servesHandler reports whether sandboxes may be run with the runtime handler h.
func (s *Server) servesHandler(h string) bool {
	return h == "" || slices.Contains(s.cfg.Handlers, h)
}

// UpdateRuntimeConfig passes the node's pod CIDR to the network.
func (s *Server) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr(); cidr != "" {
		if err := s.cfg.Network.SetPodCIDR(cidr); err != nil {
			return nil, fmt.Errorf("set pod CIDR %q: %w", cidr, err)
		}
		s.log.Info("pod CIDR set", "cidr", cidr)
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RuntimeConfig reports the cgroup driver: cgroupfs.
func (s *Server) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{
		CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}
