// Package network gives pod sandboxes of kubette's built-in runtime their network: a network
// namespace bind-mounted under the runtime's netns directory, set up by the standard CNI plugins
// (bridge with host-local IPAM over the node's pod CIDR, then portmap for hostPorts) driven through
// libcni, and one masquerade chain for the whole pod CIDR (KUBETTE-MASQ-<bridge>). Everything a
// later CNI DEL needs is kept on disk, so sandboxes can be torn down after the process restarts.
package network

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// Config says where the plugins are and where the manager keeps its state.
type Config struct {
	PluginDirs []string // default {"/usr/lib/cni", "/opt/cni/bin"}
	StateDir   string   // DATA_DIR/runtime/cni
	NetNSDir   string   // DATA_DIR/runtime/netns
	Bridge     string   // "kubette0"
}

// PortMapping is a hostPort of a pod, as CRI's PortMapping carries it.
type PortMapping struct {
	Protocol      string // "TCP" (default), "UDP" or "SCTP"
	ContainerPort int32
	HostPort      int32 // 0 = not published on the host
	HostIP        string
}

// Pod names the sandbox whose network Setup makes.
type Pod struct {
	SandboxID, Namespace, Name, UID string
	Ports                           []PortMapping
}

// Result is the network of one sandbox.
type Result struct {
	NetNSPath string
	IPs       []netip.Addr
	// What Setup's CNI ADD did, for the runtime's Events (Status leaves them empty): the
	// network's name, the plugins it ran in order (an IPAM plugin after the plugin that
	// called it), the pod's interface, its addresses with their prefix lengths and the
	// gateways IPAM gave them.
	Network   string
	Plugins   []string
	Interface string
	Addrs     []netip.Prefix
	Gateways  []netip.Addr
}

// ErrNotFound is returned by Status for a sandbox that has no network.
var ErrNotFound = errors.New("sandbox network not found")

// requiredPlugins are the CNI plugin binaries the conflist uses.
var requiredPlugins = [...]string{"bridge", "host-local", "portmap"}

// maxBridgeName is the longest Linux interface name (IFNAMSIZ - 1).
const maxBridgeName = 15

// Manager creates and removes the networks of pod sandboxes. Its methods are safe for concurrent
// use; Setup and Teardown of different sandboxes run in parallel.
type Manager struct {
	cfg Config
	cni *libcni.CNIConfig

	locks keyedMutex // one Setup/Teardown at a time per sandbox ID

	masqMu  sync.Mutex // serialises ensureMasquerade
	masqFor string     // the pod CIDRs the masquerade was last made for ("" = not yet by this process)

	mu        sync.Mutex
	cidrs     []netip.Prefix     // nil until SetPodCIDR (or a conflist from an earlier run)
	conflist  []byte             // the current conflist, nil with cidrs
	sandboxes map[string]*record // sandboxes with a network, or one being set up
}

// New validates cfg, fills its defaults and loads the state an earlier process left in StateDir:
// the pod CIDR and the sandboxes that still have a network. Missing plugins are not an error here;
// Ready reports them.
func New(cfg Config) (*Manager, error) {
	if len(cfg.PluginDirs) == 0 {
		cfg.PluginDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}
	}
	if cfg.Bridge == "" {
		cfg.Bridge = "kubette0"
	}
	if len(cfg.Bridge) > maxBridgeName || strings.ContainsAny(cfg.Bridge, "/ \t\n") {
		return nil, fmt.Errorf("network: invalid bridge name %q (at most %d bytes, no slash or space)", cfg.Bridge, maxBridgeName)
	}
	if !filepath.IsAbs(cfg.StateDir) || !filepath.IsAbs(cfg.NetNSDir) {
		return nil, fmt.Errorf("network: StateDir %q and NetNSDir %q must be absolute paths", cfg.StateDir, cfg.NetNSDir)
	}
	for _, d := range []string{cfg.StateDir, cfg.NetNSDir, filepath.Join(cfg.StateDir, "sandboxes")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	m := &Manager{
		cfg: cfg,
		// An explicit exec: libcni would otherwise set its default lazily, racing between
		// concurrent calls.
		cni: libcni.NewCNIConfigWithCacheDir(cfg.PluginDirs, filepath.Join(cfg.StateDir, "cache"), &invoke.DefaultExec{
			RawExec:       &invoke.RawExec{Stderr: os.Stderr},
			PluginDecoder: version.PluginDecoder{},
		}),
		sandboxes: map[string]*record{},
	}
	if err := m.loadConflist(); err != nil {
		return nil, err
	}
	recs, err := loadRecords(m.recordDir())
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		m.sandboxes[r.SandboxID] = r
	}
	return m, nil
}

func (m *Manager) conflistPath() string {
	return conflistPath(m.cfg.StateDir)
}

// conflistPath is where a manager with state directory stateDir keeps its conflist.
func conflistPath(stateDir string) string {
	return filepath.Join(stateDir, networkName+".conflist")
}

// RecordedBridge is the bridge named in the conflist a manager with state directory stateDir
// wrote, "" when there is none (no pod network was set up, or a reboot emptied the state). It
// lets `kubette down` find the bridge of a cluster started with --bridge without being told.
func RecordedBridge(stateDir string) (string, error) {
	b, err := os.ReadFile(conflistPath(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("network: read conflist: %w", err)
	}
	bridge, err := conflistBridge(b)
	if err != nil {
		return "", fmt.Errorf("network: %s: %w", conflistPath(stateDir), err)
	}
	return bridge, nil
}
func (m *Manager) ipamDir() string   { return filepath.Join(m.cfg.StateDir, "ipam") }
func (m *Manager) recordDir() string { return filepath.Join(m.cfg.StateDir, "sandboxes") }

// loadConflist restores the pod CIDR from the conflist an earlier run wrote, re-rendering it in
// case the configuration (the bridge name, the state directory) changed since.
func (m *Manager) loadConflist() error {
	b, err := os.ReadFile(m.conflistPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("network: read conflist: %w", err)
	}
	cidrs, err := conflistCIDRs(b)
	if err != nil {
		return fmt.Errorf("network: %s: %w", m.conflistPath(), err)
	}
	return m.writeConflist(cidrs)
}

// writeConflist renders the conflist for cidrs, writes it when it changed and makes it current.
// The caller holds m.mu, or m is not shared yet.
func (m *Manager) writeConflist(cidrs []netip.Prefix) error {
	b, err := buildConflist(m.cfg.Bridge, cidrs, m.ipamDir())
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if old, err := os.ReadFile(m.conflistPath()); err != nil || !bytes.Equal(old, b) {
		if err := writeFileAtomic(m.conflistPath(), b); err != nil {
			return fmt.Errorf("network: write conflist: %w", err)
		}
	}
	m.cidrs, m.conflist = cidrs, b
	return nil
}

// SetPodCIDR sets the node's pod CIDR (one prefix, or "v4,v6" for dual stack) and writes the
// conflist. Setting the same CIDR again is a no-op; changing it is refused while any sandbox still
// has an address from the old one.
func (m *Manager) SetPodCIDR(cidr string) error {
	cidrs, err := parseCIDRs(cidr)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cidrs != nil && formatCIDRs(m.cidrs) == formatCIDRs(cidrs) {
		return nil
	}
	if m.cidrs != nil && len(m.sandboxes) > 0 {
		return fmt.Errorf("network: change pod CIDR from %s to %s: %d sandboxes still use the old one",
			formatCIDRs(m.cidrs), formatCIDRs(cidrs), len(m.sandboxes))
	}
	return m.writeConflist(cidrs)
}

// Ready returns nil when every CNI plugin the conflist uses is installed and a pod CIDR is set,
// and otherwise an error that says what is missing and how to get it.
func (m *Manager) Ready() error {
	for _, p := range requiredPlugins {
		if _, err := m.findPlugin(p); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cidrs == nil {
		return errors.New("network: no pod CIDR set yet (the node has no spec.podCIDR, or the kubelet has not passed it on)")
	}
	return nil
}

// findPlugin returns the path of the first executable called name in the plugin directories.
func (m *Manager) findPlugin(name string) (string, error) {
	for _, d := range m.cfg.PluginDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("CNI plugin %s not found in %s: apt-get install -y containernetworking-plugins",
		name, strings.Join(m.cfg.PluginDirs, ", "))
}

// writeFileAtomic writes b to a temporary file beside path and renames it over path.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// keyedMutex serialises work per key while letting different keys proceed in parallel.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks key and returns its unlock function.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
