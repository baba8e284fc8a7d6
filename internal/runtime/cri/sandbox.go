package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunPodSandbox creates a sandbox: its directory with hostname, hosts and resolv.conf, and
// (unless the pod uses the node's network) its network namespace.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (_ *runtimeapi.RunPodSandboxResponse, retErr error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "pod sandbox config needs metadata with a name")
	}
	handler := req.GetRuntimeHandler()
	if !s.servesHandler(handler) {
		// containerd's answer to a handler its configuration has no runtime for.
		return nil, status.Errorf(codes.Unknown, "failed to get sandbox runtime: no runtime for %q is configured", handler)
	}
	s.mu.Lock()
	err := s.checkSandboxName(md)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}

	id := newID()
	dir := s.sandboxDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create sandbox directory %q: %w", dir, err)
	}
	var undo []func(context.Context) error
	defer func() {
		if retErr == nil {
			return
		}
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		var errs []error
		for _, f := range slices.Backward(undo) {
			errs = append(errs, f(cctx))
		}
		errs = append(errs, os.RemoveAll(dir))
		if err := errors.Join(errs...); err != nil {
			s.log.Warn("cleanup after a failed RunPodSandbox", "id", id, "err", err)
		}
	}()

	hostNet := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	hostname := cfg.GetHostname()
	if hostname == "" && hostNet {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("hostname: %w", err)
		}
		hostname = h
	}
	if err := os.WriteFile(filepath.Join(dir, "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("failed to write the hostname of sandbox %s: %w", id, err)
	}
	resolv, err := s.resolvConf(cfg.GetDnsConfig())
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), resolv, 0o644); err != nil {
		return nil, fmt.Errorf("failed to write the resolv.conf of sandbox %s: %w", id, err)
	}

	m := sandboxMeta{ID: id, Ready: true, CreatedAt: time.Now().UnixNano(), HostNet: hostNet, Hostname: hostname, Handler: handler}
	nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	m.PodNS, err = s.cfg.Containers.SetupPodNamespaces(dir, nsOpts.GetIpc() == runtimeapi.NamespaceMode_POD, nsOpts.GetPid() == runtimeapi.NamespaceMode_POD)
	if err != nil {
		return nil, fmt.Errorf("failed to set up the shared namespaces of sandbox %s: %w", id, err)
	}
	podNS := m.PodNS
	undo = append(undo, func(context.Context) error { return s.cfg.Containers.RemovePodNamespaces(podNS) })
	if !hostNet {
		pod := Pod{SandboxID: id, Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid()}
		for _, p := range cfg.GetPortMappings() {
			if p.GetHostPort() <= 0 {
				continue
			}
			pod.Ports = append(pod.Ports, PortMapping{Protocol: p.GetProtocol().String(), ContainerPort: p.GetContainerPort(),
				HostPort: p.GetHostPort(), HostIP: p.GetHostIp()})
		}
		netStart := time.Now()
		res, err := s.cfg.Network.Setup(ctx, pod)
		if err != nil {
			// Setup may have done part of its work: tear down whatever it left.
			undo = append(undo, func(ctx context.Context) error { return s.cfg.Network.Teardown(ctx, id) })
			return nil, fmt.Errorf("failed to set up the network of sandbox %s (%s/%s): %w", id, md.GetNamespace(), md.GetName(), err)
		}
		undo = append(undo, func(ctx context.Context) error { return s.cfg.Network.Teardown(ctx, id) })
		m.NetNSPath = res.NetNSPath
		for _, ip := range res.IPs {
			m.IPs = append(m.IPs, ip.String())
		}
		s.noteNetwork(md, res, netStart)
	}
	hosts, err := s.hostsFile(hostNet, hostname, m.IPs)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), hosts, 0o644); err != nil {
		return nil, fmt.Errorf("failed to write the hosts file of sandbox %s: %w", id, err)
	}
	raw, err := marshalConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode sandbox config: %w", err)
	}
	m.Config = raw
	if err := s.saveSandbox(m); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if err := s.checkSandboxName(md); err != nil {
		// A concurrent RunPodSandbox of the same pod and attempt won.
		s.mu.Unlock()
		return nil, err
	}
	s.sandboxes[id] = &sandbox{meta: m, cfg: proto.CloneOf(cfg)}
	s.mu.Unlock()
	s.log.Info("pod sandbox ready", "id", id, "pod", md.GetNamespace()+"/"+md.GetName(), "ips", m.IPs)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// checkSandboxName fails with AlreadyExists when a sandbox of this pod and attempt exists;
// the caller holds s.mu.
func (s *Server) checkSandboxName(md *runtimeapi.PodSandboxMetadata) error {
	for _, sb := range s.sandboxes {
		o := sb.cfg.GetMetadata()
		if o.GetName() == md.GetName() && o.GetNamespace() == md.GetNamespace() && o.GetUid() == md.GetUid() && o.GetAttempt() == md.GetAttempt() {
			return status.Errorf(codes.AlreadyExists, "pod sandbox %s/%s (uid %s, attempt %d) already exists as %s",
				md.GetNamespace(), md.GetName(), md.GetUid(), md.GetAttempt(), sb.meta.ID)
		}
	}
	return nil
}

// resolvConf renders the sandbox's resolv.conf from the pod's DNS config, or copies the host's.
func (s *Server) resolvConf(dns *runtimeapi.DNSConfig) ([]byte, error) {
	if dns == nil {
		b, err := os.ReadFile(s.cfg.HostResolvConf)
		if err != nil {
			return nil, fmt.Errorf("read the host's resolv.conf: %w", err)
		}
		return b, nil
	}
	var b strings.Builder
	if len(dns.GetSearches()) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(dns.GetSearches(), " "))
	}
	for _, ns := range dns.GetServers() {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(dns.GetOptions()) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(dns.GetOptions(), " "))
	}
	return []byte(b.String()), nil
}

// hostsFile renders the sandbox's /etc/hosts: the host's for host-network pods, else the
// localhost lines and the pod's first IP with its hostname.
func (s *Server) hostsFile(hostNet bool, hostname string, ips []string) ([]byte, error) {
	if hostNet {
		b, err := os.ReadFile(s.cfg.HostHosts)
		if err != nil {
			return nil, fmt.Errorf("read the host's hosts file: %w", err)
		}
		return b, nil
	}
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	if len(ips) > 0 && hostname != "" {
		fmt.Fprintf(&b, "%s\t%s\n", ips[0], hostname)
	}
	return []byte(b.String()), nil
}

// StopPodSandbox stops every container of the sandbox and tears its network down; stopping
// a stopped or unknown sandbox is not an error.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	sb, err := s.findSandbox(req.GetPodSandboxId())
	if isNotFound(err) {
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.stopSandbox(ctx, sb, s.cfg.SandboxStopGrace); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// stopSandbox marks sb NOTREADY (so no container joins it any more), stops its containers
// at once, each with the grace (then SIGKILL), and tears its network down.
func (s *Server) stopSandbox(ctx context.Context, sb *sandbox, grace time.Duration) error {
	sb.op.Lock()
	defer sb.op.Unlock()
	s.mu.Lock()
	wasReady := sb.meta.Ready
	sb.meta.Ready = false
	m := sb.meta
	s.mu.Unlock()
	if wasReady {
		if err := s.saveSandbox(m); err != nil {
			return err
		}
	}
	ctrs := s.containersOf(m.ID)
	errs := make([]error, len(ctrs))
	var wg sync.WaitGroup
	for i, c := range ctrs {
		wg.Go(func() { errs[i] = s.stopContainer(ctx, c, grace) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to stop the containers of sandbox %s: %w", m.ID, err)
	}
	if err := s.cfg.Containers.StopPodNamespaces(m.PodNS); err != nil {
		return fmt.Errorf("failed to stop sandbox %s: %w", m.ID, err)
	}
	if !m.HostNet {
		if err := s.cfg.Network.Teardown(ctx, m.ID); err != nil {
			return fmt.Errorf("failed to tear down the network of sandbox %s: %w", m.ID, err)
		}
	}
	if wasReady {
		s.log.Info("pod sandbox stopped", "id", m.ID)
	}
	return nil
}

// containersOf returns the containers of a sandbox.
func (s *Server) containersOf(sandboxID string) []*container {
	var out []*container
	for _, c := range s.containerList() {
		s.mu.Lock()
		match := c.meta.SandboxID == sandboxID
		s.mu.Unlock()
		if match {
			out = append(out, c)
		}
	}
	return out
}

// RemovePodSandbox stops the sandbox if needed, removes its containers and its files;
// removing an unknown sandbox is not an error.
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	sb, err := s.findSandbox(req.GetPodSandboxId())
	if isNotFound(err) {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.removeSandbox(ctx, sb, s.cfg.SandboxStopGrace); err != nil {
		return nil, err
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// removeSandbox stops sb (each container with the grace) and removes it.
func (s *Server) removeSandbox(ctx context.Context, sb *sandbox, grace time.Duration) error {
	if err := s.stopSandbox(ctx, sb, grace); err != nil {
		return err
	}
	sb.op.Lock()
	defer sb.op.Unlock()
	s.mu.Lock()
	id := sb.meta.ID
	_, present := s.sandboxes[id]
	s.mu.Unlock()
	if !present {
		return nil
	}
	for _, c := range s.containersOf(id) {
		if err := s.removeContainer(ctx, c); err != nil {
			return fmt.Errorf("failed to remove sandbox %s: %w", id, err)
		}
	}
	s.removeCgroupParent(sb)
	if err := s.cfg.Containers.RemovePodNamespaces(sb.meta.PodNS); err != nil {
		return fmt.Errorf("failed to remove sandbox %s: %w", id, err)
	}
	dir := s.sandboxDir(id)
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove sandbox %s: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("failed to remove the directory of sandbox %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.sandboxes, id)
	s.mu.Unlock()
	s.log.Info("pod sandbox removed", "id", id)
	return nil
}

// sandboxReady tells whether a sandbox is READY: not stopped, and its pid namespace's holder
// (shareProcessNamespace) still alive, as a sandbox whose pause container died is NOTREADY
// under containerd (the kubelet then makes the pod a new one).
func sandboxReady(m sandboxMeta) bool {
	return m.Ready && (m.PodNS.PIDHolder == nil || m.PodNS.PIDHolder.Alive())
}

func sandboxState(ready bool) runtimeapi.PodSandboxState {
	if ready {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// PodSandboxStatus reports one sandbox.
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	m, cfg := sb.meta, sb.cfg
	s.mu.Unlock()
	st := &runtimeapi.PodSandboxStatus{
		Id: m.ID, Metadata: cfg.GetMetadata(), State: sandboxState(sandboxReady(m)), CreatedAt: m.CreatedAt,
		Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(), RuntimeHandler: m.Handler,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	// As containerd: no IP for host-network pods or once the network is torn down.
	st.Network = &runtimeapi.PodSandboxNetworkStatus{}
	if !m.HostNet && m.Ready {
		for i, ip := range m.IPs {
			if i == 0 {
				st.Network.Ip = ip
			} else {
				st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
			}
		}
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.GetVerbose() {
		for _, c := range s.containersOf(m.ID) {
			resp.ContainersStatuses = append(resp.ContainersStatuses, s.containerStatus(ctx, c))
		}
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching the filter (ID or ID prefix, state, labels).
func (s *Server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{}}
	for _, sb := range s.sandboxes {
		m, cfg := sb.meta, sb.cfg
		if !hasPrefix(m.ID, f.GetId()) || !matchLabels(cfg.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != sandboxState(sandboxReady(m)) {
			continue
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id: m.ID, Metadata: cfg.GetMetadata(), State: sandboxState(sandboxReady(m)), CreatedAt: m.CreatedAt,
			Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(), RuntimeHandler: m.Handler,
		})
	}
	slices.SortFunc(resp.Items, func(a, b *runtimeapi.PodSandbox) int {
		if a.CreatedAt != b.CreatedAt {
			return int(a.CreatedAt - b.CreatedAt)
		}
		return compareStrings(a.Id, b.Id)
	})
	return resp, nil
}

// Down kills and removes every sandbox and container (for `kubette down`).
func (s *Server) Down(ctx context.Context) error {
	var errs []error
	s.mu.Lock()
	sbs := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		sbs = append(sbs, sb)
	}
	s.mu.Unlock()
	for _, sb := range sbs {
		errs = append(errs, s.removeSandbox(ctx, sb, 0))
	}
	for _, c := range s.containerList() { // containers whose sandbox record was lost
		errs = append(errs, s.stopContainer(ctx, c, 0), s.removeContainer(ctx, c))
	}
	return errors.Join(errs...)
}

// defaultCgroupParent is the cgroup of a sandbox's containers when the kubelet names none.
func defaultCgroupParent(sandboxID string) string { return "/kubette/pod-" + sandboxID[:12] }

// sandboxCgroupParent is the cgroup parent of a sandbox's containers.
func sandboxCgroupParent(sb *sandbox) string {
	if p := sb.cfg.GetLinux().GetCgroupParent(); p != "" {
		return p
	}
	return defaultCgroupParent(sb.meta.ID)
}

// removeCgroupParent removes a removed sandbox's cgroup parent from every cgroup v1
// hierarchy (runc removes the containers' cgroups, not their parents), unless another
// sandbox shares it. Only parents below /kubette/ are kubette's to remove (the default one
// or the kubelet's /kubette/pod<uid>); a non-empty cgroup stays. Best effort.
func (s *Server) removeCgroupParent(sb *sandbox) {
	parent := filepath.Clean(sandboxCgroupParent(sb))
	if !strings.HasPrefix(parent, "/kubette/") {
		return
	}
	s.mu.Lock()
	for _, other := range s.sandboxes {
		if other != sb && filepath.Clean(sandboxCgroupParent(other)) == parent {
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	hierarchies, err := os.ReadDir(s.cfg.CgroupRoot)
	if err != nil {
		return
	}
	for _, h := range hierarchies {
		dir := filepath.Join(s.cfg.CgroupRoot, h.Name(), parent)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Debug("cannot remove a sandbox's cgroup", "dir", dir, "err", err)
		}
	}
}
