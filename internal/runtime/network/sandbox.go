package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// ifName is the pod's interface inside its network namespace.
const ifName = "eth0"

// undoTimeout bounds the clean-up after a failed Setup, which runs even when Setup's context is done.
const undoTimeout = time.Minute

// record is what the manager keeps on disk per sandbox, written before the network is made: all a
// later CNI DEL needs (the conflist ADD used, the CNI args and capability args), so Teardown works
// after a restart even if the pod CIDR or the configuration changed since. libcni keeps the ADD
// result itself, in its cache directory under StateDir.
type record struct {
	SandboxID    string         `json:"sandboxID"`
	NetNSPath    string         `json:"netnsPath"`
	Conflist     string         `json:"conflist"`
	Args         [][2]string    `json:"args"`
	PortMappings []portMapEntry `json:"portMappings,omitempty"`
}

// portMapEntry is one entry of the portMappings capability argument, as the portmap plugin reads it.
type portMapEntry struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// runtimeConf is the libcni runtime configuration of the sandbox with the given netns path ("" when
// the namespace is gone, as CRI runtimes pass it on DEL).
func (r *record) runtimeConf(netns string) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{ContainerID: r.SandboxID, NetNS: netns, IfName: ifName, Args: r.Args}
	if len(r.PortMappings) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": r.PortMappings}
	}
	return rt
}

// networkList parses the conflist the sandbox was set up with.
func (r *record) networkList() (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes([]byte(r.Conflist))
	if err != nil {
		return nil, fmt.Errorf("parse conflist of sandbox %s: %w", r.SandboxID, err)
	}
	return list, nil
}

// Setup creates the sandbox's network namespace at NetNSDir/<sandbox ID> with lo up, runs CNI ADD
// in it and returns the namespace path and the pod's IPs. If anything fails, what was made is
// undone before the error is returned.
func (m *Manager) Setup(ctx context.Context, pod Pod) (_ Result, err error) {
	if err := validID(pod.SandboxID); err != nil {
		return Result{}, fmt.Errorf("set up network: %w", err)
	}
	ports, err := portMappings(pod.Ports)
	if err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	for _, p := range requiredPlugins {
		if _, err := m.findPlugin(p); err != nil {
			return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
		}
	}
	if err := m.ensureMasquerade(ctx); err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	unlock := m.locks.lock(pod.SandboxID)
	defer unlock()

	rec := &record{
		SandboxID: pod.SandboxID,
		NetNSPath: filepath.Join(m.cfg.NetNSDir, pod.SandboxID),
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", pod.SandboxID},
			{"K8S_POD_UID", pod.UID},
		},
		PortMappings: ports,
	}
	if err := m.register(rec); err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	defer func() {
		if err == nil {
			return
		}
		undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		if uerr := m.teardown(undoCtx, rec); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
		}
	}()

	if err := writeRecord(m.recordDir(), rec); err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	if err := createNetNS(rec.NetNSPath); err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	list, err := rec.networkList()
	if err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	var res types.Result
	err = withPortmapLock(false, func() (err error) {
		res, err = m.cni.AddNetworkList(ctx, list, rec.runtimeConf(rec.NetNSPath))
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: CNI ADD: %w", pod.SandboxID, err)
	}
	ips, err := resultIPs(res)
	if err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", pod.SandboxID, err)
	}
	out := Result{NetNSPath: rec.NetNSPath, IPs: ips}
	describe(list, res, &out)
	return out, nil
}

// ensureMasquerade makes the pod masquerade for the current pod CIDR unless this manager did
// so already: once per process and CIDR, not per sandbox.
func (m *Manager) ensureMasquerade(ctx context.Context) error {
	m.mu.Lock()
	cidrs := m.cidrs
	m.mu.Unlock()
	if cidrs == nil {
		return errors.New("no pod CIDR set yet")
	}
	m.masqMu.Lock()
	defer m.masqMu.Unlock()
	if m.masqFor == formatCIDRs(cidrs) {
		return nil
	}
	if err := ensureMasquerade(ctx, m.cfg.Bridge, cidrs); err != nil {
		return err
	}
	m.masqFor = formatCIDRs(cidrs)
	return nil
}

// register claims the sandbox ID with the current conflist; from now on the sandbox counts as
// using the pod CIDR.
func (m *Manager) register(rec *record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conflist == nil {
		return errors.New("no pod CIDR set yet")
	}
	if _, ok := m.sandboxes[rec.SandboxID]; ok {
		return errors.New("the sandbox already has a network")
	}
	rec.Conflist = string(m.conflist)
	if len(rec.PortMappings) == 0 {
		// Without hostPorts the portmap plugin has nothing to do on ADD, yet it costs a
		// process, and on DEL iptables processes: the sandbox's conflist leaves it out.
		b, err := withoutPortmap(m.conflist)
		if err != nil {
			return err
		}
		rec.Conflist = string(b)
	}
	m.sandboxes[rec.SandboxID] = rec
	return nil
}

// Teardown runs CNI DEL for the sandbox (with an empty netns path if its namespace is already
// gone), then unmounts and removes the namespace file. It is idempotent: tearing down a sandbox
// twice, or one this manager never knew, returns nil; only a malformed ID is an error.
func (m *Manager) Teardown(ctx context.Context, sandboxID string) error {
	if err := validID(sandboxID); err != nil {
		return fmt.Errorf("tear down network: %w", err)
	}
	unlock := m.locks.lock(sandboxID)
	defer unlock()
	m.mu.Lock()
	rec := m.sandboxes[sandboxID]
	m.mu.Unlock()
	if rec == nil {
		// Nothing on record; a namespace file cannot exist without one, but remove any all the same.
		return removeNetNS(filepath.Join(m.cfg.NetNSDir, sandboxID))
	}
	return m.teardown(ctx, rec)
}

// teardown undoes what Setup made for rec, in reverse order. The record goes last, so a failed
// teardown can be retried, also by a later process. The caller holds the sandbox's key lock.
func (m *Manager) teardown(ctx context.Context, rec *record) error {
	netns := rec.NetNSPath
	if ns.IsNSorErr(netns) != nil {
		netns = ""
	}
	list, err := rec.networkList()
	if err != nil {
		return fmt.Errorf("tear down network: %w", err)
	}
	if err := m.cni.DelNetworkList(ctx, list, rec.runtimeConf(netns)); err != nil {
		return fmt.Errorf("tear down network of sandbox %s: CNI DEL: %w", rec.SandboxID, err)
	}
	if netns == "" {
		// Without the namespace the bridge plugin cannot remove its masquerade rule.
		if err := removeSandboxRules(ctx, rec.SandboxID); err != nil {
			return fmt.Errorf("tear down network of sandbox %s: %w", rec.SandboxID, err)
		}
	}
	if err := removeNetNS(rec.NetNSPath); err != nil {
		return fmt.Errorf("tear down network of sandbox %s: %w", rec.SandboxID, err)
	}
	if err := os.Remove(recordPath(m.recordDir(), rec.SandboxID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tear down network of sandbox %s: %w", rec.SandboxID, err)
	}
	m.mu.Lock()
	delete(m.sandboxes, rec.SandboxID)
	m.mu.Unlock()
	return nil
}

// Status returns the sandbox's netns path and the IPs of its cached CNI result; the IPs are empty
// while Setup is still running. A sandbox without a network gives an error wrapping ErrNotFound.
func (m *Manager) Status(sandboxID string) (Result, error) {
	m.mu.Lock()
	rec := m.sandboxes[sandboxID]
	m.mu.Unlock()
	if rec == nil {
		return Result{}, fmt.Errorf("network status of sandbox %s: %w", sandboxID, ErrNotFound)
	}
	list, err := rec.networkList()
	if err != nil {
		return Result{}, fmt.Errorf("network status: %w", err)
	}
	cached, err := m.cni.GetNetworkListCachedResult(list, rec.runtimeConf(rec.NetNSPath))
	if err != nil {
		return Result{}, fmt.Errorf("network status of sandbox %s: read cached CNI result: %w", sandboxID, err)
	}
	out := Result{NetNSPath: rec.NetNSPath}
	if cached == nil {
		return out, nil
	}
	if out.IPs, err = resultIPs(cached); err != nil {
		return Result{}, fmt.Errorf("network status of sandbox %s: %w", sandboxID, err)
	}
	return out, nil
}

// Cleanup tears down the network of every sandbox the manager knows, deletes the bridge and the
// pod masquerade; the conflist and the pod CIDR stay. `kubette down` calls it.
func (m *Manager) Cleanup(ctx context.Context) error {
	m.mu.Lock()
	ids := make([]string, 0, len(m.sandboxes))
	for id := range m.sandboxes {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, m.Teardown(ctx, id))
	}
	errs = append(errs, deleteBridge(m.cfg.Bridge))
	m.masqMu.Lock()
	errs = append(errs, RemoveMasquerade(ctx, m.cfg.Bridge))
	m.masqFor = ""
	m.masqMu.Unlock()
	if errors.Join(errs...) == nil {
		errs = append(errs, removeIdlePortmapChains(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("network clean-up: %w", err)
	}
	return nil
}

// deleteBridge removes the bridge link if it exists.
func deleteBridge(name string) error {
	link, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find bridge %s: %w", name, err)
	}
	if link.Type() != "bridge" {
		return fmt.Errorf("delete bridge %s: the link is a %s, not a bridge", name, link.Type())
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("delete bridge %s: %w", name, err)
	}
	return nil
}

// resultIPs returns the addresses of a CNI result.
func resultIPs(res types.Result) ([]netip.Addr, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert CNI result: %w", err)
	}
	var ips []netip.Addr
	for _, ipc := range r.IPs {
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			return nil, fmt.Errorf("CNI result has an invalid IP %v", ipc.Address.IP)
		}
		ips = append(ips, a.Unmap())
	}
	if len(ips) == 0 {
		return nil, errors.New("CNI result has no IP")
	}
	return ips, nil
}

// portMappings turns CRI port mappings into portmap's capability argument; ports not published on
// the host (HostPort 0) are left out, as CRI runtimes do.
func portMappings(in []PortMapping) ([]portMapEntry, error) {
	var out []portMapEntry
	for _, p := range in {
		if p.HostPort <= 0 {
			continue
		}
		proto := strings.ToLower(p.Protocol)
		switch proto {
		case "":
			proto = "tcp"
		case "tcp", "udp", "sctp":
		default:
			return nil, fmt.Errorf("port mapping %d→%d: unknown protocol %q", p.HostPort, p.ContainerPort, p.Protocol)
		}
		if p.ContainerPort <= 0 || p.ContainerPort > 65535 || p.HostPort > 65535 {
			return nil, fmt.Errorf("port mapping %d→%d: port out of range", p.HostPort, p.ContainerPort)
		}
		if p.HostIP != "" {
			if _, err := netip.ParseAddr(p.HostIP); err != nil {
				return nil, fmt.Errorf("port mapping %d→%d: host IP: %w", p.HostPort, p.ContainerPort, err)
			}
		}
		out = append(out, portMapEntry{HostPort: int(p.HostPort), ContainerPort: int(p.ContainerPort), Protocol: proto, HostIP: p.HostIP})
	}
	return out, nil
}

// validID accepts the sandbox IDs CNI accepts as container IDs, which are also safe file names.
func validID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("invalid sandbox ID %q", id)
	}
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return fmt.Errorf("invalid sandbox ID %q", id)
		}
	}
	return nil
}

func recordPath(dir, id string) string { return filepath.Join(dir, id+".json") }

// writeRecord persists rec atomically.
func writeRecord(dir string, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode sandbox record: %w", err)
	}
	if err := writeFileAtomic(recordPath(dir, rec.SandboxID), b); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	return nil
}

// loadRecords reads every sandbox record in dir.
func loadRecords(dir string) ([]*record, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("network: read sandbox records: %w", err)
	}
	var out []*record
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("network: read sandbox record: %w", err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("network: sandbox record %s: %w", name, err)
		}
		if rec.SandboxID+".json" != name || validID(rec.SandboxID) != nil {
			return nil, fmt.Errorf("network: sandbox record %s names sandbox %q", name, rec.SandboxID)
		}
		out = append(out, &rec)
	}
	return out, nil
}
