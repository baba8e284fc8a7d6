package network

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// testEnv is a manager on its own bridge, pod CIDR and directories, cleaned up with the test.
type testEnv struct {
	m    *Manager
	cfg  Config
	cidr netip.Prefix

	mu  sync.Mutex
	ids []string // every sandbox ID handed out, for the iptables check
}

// newTestEnv needs root and the CNI plugins. pluginDirs overrides where the plugins are looked for.
func newTestEnv(t testing.TB, pluginDirs ...string) *testEnv {
	t.Helper()
	needs.Root(t)
	dir := needs.CNIPlugins(t)
	if len(pluginDirs) == 0 {
		pluginDirs = []string{dir}
	}
	base := t.TempDir()
	e := &testEnv{cfg: Config{
		PluginDirs: pluginDirs,
		StateDir:   filepath.Join(base, "cni"),
		NetNSDir:   filepath.Join(base, "netns"),
		Bridge:     randomBridgeName(),
	}}
	m, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(func() { e.cleanup(t) })
	e.cidr = freePodCIDR(t)
	if err := m.SetPodCIDR(e.cidr.String()); err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); err != nil {
		t.Fatal(err)
	}
	return e
}

// cleanup tears everything down and checks that nothing the plugins made is left behind.
func (e *testEnv) cleanup(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.m.Cleanup(ctx); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	if err := deleteBridge(e.cfg.Bridge); err != nil {
		t.Errorf("delete bridge: %v", err)
	}
	if _, err := netlink.LinkByName(e.cfg.Bridge); err == nil {
		t.Errorf("bridge %s still exists after Cleanup", e.cfg.Bridge)
	}
	e.mu.Lock()
	ids := slices.Clone(e.ids)
	e.mu.Unlock()
	for _, id := range ids {
		if err := removeNetNS(filepath.Join(e.cfg.NetNSDir, id)); err != nil {
			t.Errorf("remove leftover netns: %v", err)
		}
	}
	assertNoIPTables(t, ids...)
	if lines := masqLines(t, e.cfg.Bridge); len(lines) > 0 {
		t.Errorf("pod masquerade left after Cleanup:\n%s", strings.Join(lines, "\n"))
	}
	if left, _ := os.ReadDir(e.cfg.NetNSDir); len(left) > 0 {
		t.Errorf("netns files left after Cleanup: %v", left)
	}
}

// newID returns a random sandbox ID, 64 hex characters as containerd's.
func (e *testEnv) newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	e.mu.Lock()
	e.ids = append(e.ids, id)
	e.mu.Unlock()
	return id
}

// setup sets up a pod with a fresh sandbox ID.
func (e *testEnv) setup(t *testing.T, name string, ports ...PortMapping) (string, Result) {
	t.Helper()
	id := e.newID()
	res, err := e.m.Setup(context.Background(), Pod{SandboxID: id, Namespace: "default", Name: name, UID: "uid-" + name, Ports: ports})
	if err != nil {
		t.Fatalf("Setup %s: %v", name, err)
	}
	if len(res.IPs) != 1 || !e.cidr.Contains(res.IPs[0]) {
		t.Fatalf("Setup %s: IPs %v, want one address in %s", name, res.IPs, e.cidr)
	}
	if res.NetNSPath != filepath.Join(e.cfg.NetNSDir, id) {
		t.Fatalf("Setup %s: netns %s, want %s", name, res.NetNSPath, filepath.Join(e.cfg.NetNSDir, id))
	}
	return id, res
}

// ipamFile is host-local's reservation of ip.
func (e *testEnv) ipamFile(ip netip.Addr) string {
	return filepath.Join(e.cfg.StateDir, "ipam", networkName, ip.String())
}

// bridgePorts counts the links enslaved to the test's bridge (the host ends of the pods' veths).
func (e *testEnv) bridgePorts(t *testing.T) int {
	t.Helper()
	br, err := netlink.LinkByName(e.cfg.Bridge)
	if err != nil {
		t.Fatalf("find bridge: %v", err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			n++
		}
	}
	return n
}

func randomBridgeName() string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte("kbt")
	for range 6 {
		b = append(b, chars[mrand.IntN(len(chars))])
	}
	return string(b)
}

// freePodCIDR picks a 10.88.x.0/24 (x in 200..249) that no route on this host overlaps, so tests
// running at the same time (here or in other packages) do not share a subnet.
func freePodCIDR(t testing.TB) netip.Prefix {
	t.Helper()
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := mrand.IntN(50)
	for i := range 50 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 88, byte(200 + (start+i)%50), 0}), 24)
		free := true
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			d, ok := netip.AddrFromSlice(r.Dst.IP)
			ones, _ := r.Dst.Mask.Size()
			if ok && ones > 0 && netip.PrefixFrom(d.Unmap(), ones).Overlaps(p) { // not the default route
				free = false
				break
			}
		}
		if free {
			return p
		}
	}
	t.Fatal("no free 10.88.x.0/24 for a test pod CIDR")
	return netip.Prefix{}
}

// assertNoIPTables fails the test if any iptables rule or chain of the given sandboxes remains:
// the bridge plugin's masquerade chain, portmap's DNAT and SNAT chains, or a rule whose comment
// names the sandbox.
func assertNoIPTables(t testing.TB, ids ...string) {
	t.Helper()
	for _, id := range ids {
		for _, line := range iptablesLines(t, id) {
			t.Errorf("iptables still mentions sandbox %s: %s", id, line)
		}
	}
}

// iptablesLines returns the iptables-save lines that mention the sandbox: its ID (rule comments)
// or one of the chain names the plugins derive from it.
func iptablesLines(t testing.TB, id string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v\n%s", err, out)
	}
	needles := []string{id, pluginChainName("", id), pluginChainName("DN-", id), pluginChainName("SN-", id)}
	var lines []string
	for _, line := range strings.Split(string(out), "\n") {
		if slices.ContainsFunc(needles, func(n string) bool { return strings.Contains(line, n) }) {
			lines = append(lines, line)
		}
	}
	return lines
}

// pluginChainName is the name the plugins give a sandbox's iptables chain: "CNI-", a prefix, then
// the hex SHA-512 of network name and container ID, cut to 28 characters (their pkg/utils).
func pluginChainName(prefix, id string) string {
	return fmt.Sprintf("CNI-%s%x", prefix, sha512.Sum512([]byte(networkName+id)))[:28]
}

// listen runs a TCP server inside the namespace at netnsPath that answers every connection with
// greeting; it stops with the test.
func listen(t *testing.T, netnsPath string, port int, greeting string) {
	t.Helper()
	var l net.Listener
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", netnsPath, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return // the listener was closed
			}
			_, _ = io.WriteString(c, greeting+"\n")
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
}

// fetch connects to addr (from inside netnsPath, or from the host when it is "") and returns the
// first line it reads. It retries for a generous while: a new veth may take a moment to forward.
func fetch(t *testing.T, netnsPath, addr string) string {
	t.Helper()
	once := func() (string, error) {
		var line string
		dial := func(ns.NetNS) error {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err = bufio.NewReader(c).ReadString('\n')
			return err
		}
		var err error
		if netnsPath == "" {
			err = dial(nil)
		} else {
			err = ns.WithNetNSPath(netnsPath, dial)
		}
		return strings.TrimSpace(line), err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		line, err := once()
		if err == nil {
			return line
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect to %s from %q: %v", addr, netnsPath, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hostAddr is this machine's IPv4 address on eth0.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	link, err := netlink.LinkByName("eth0")
	if err != nil {
		t.Skipf("skipping: no eth0 to reach a hostPort through: %v", err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsGlobalUnicast() {
			return ip.Unmap()
		}
	}
	t.Skip("skipping: eth0 has no IPv4 address")
	return netip.Addr{}
}

// freeHostPort returns a TCP port nothing on the host listens on right now.
func freeHostPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestPodsTalkAndTeardownFreesEverything(t *testing.T) {
	e := newTestEnv(t)
	host := hostAddr(t)
	hostPort := freeHostPort(t)

	idA, a := e.setup(t, "a", PortMapping{Protocol: "TCP", ContainerPort: 8080, HostPort: int32(hostPort)})
	idB, b := e.setup(t, "b")
	if a.IPs[0] == b.IPs[0] {
		t.Fatalf("both pods got %s", a.IPs[0])
	}
	for _, r := range []Result{a, b} {
		if err := ns.IsNSorErr(r.NetNSPath); err != nil {
			t.Fatalf("netns %s: %v", r.NetNSPath, err)
		}
		if !exists(e.ipamFile(r.IPs[0])) {
			t.Errorf("no host-local reservation for %s", r.IPs[0])
		}
	}
	if got, err := e.m.Status(idA); err != nil || got.NetNSPath != a.NetNSPath || !slices.Equal(got.IPs, a.IPs) {
		t.Errorf("Status(a) = %+v, %v; want %+v", got, err, a)
	}
	if n := e.bridgePorts(t); n != 2 {
		t.Errorf("%d links on the bridge, want 2", n)
	}

	listen(t, a.NetNSPath, 8080, "hello from a")
	listen(t, b.NetNSPath, 8080, "hello from b")
	aAddr := netip.AddrPortFrom(a.IPs[0], 8080).String()
	bAddr := netip.AddrPortFrom(b.IPs[0], 8080).String()
	if got := fetch(t, b.NetNSPath, aAddr); got != "hello from a" {
		t.Errorf("b → a: %q", got)
	}
	if got := fetch(t, a.NetNSPath, bAddr); got != "hello from b" {
		t.Errorf("a → b: %q", got)
	}
	if got := fetch(t, "", aAddr); got != "hello from a" {
		t.Errorf("host → a: %q", got)
	}
	if got := fetch(t, a.NetNSPath, "127.0.0.1:8080"); got != "hello from a" {
		t.Errorf("a → its own loopback: %q", got)
	}
	hostPortAddr := netip.AddrPortFrom(host, uint16(hostPort)).String()
	if got := fetch(t, "", hostPortAddr); got != "hello from a" {
		t.Errorf("host → %s (hostPort of a): %q", hostPortAddr, got)
	}
	if got := fetch(t, b.NetNSPath, hostPortAddr); got != "hello from a" {
		t.Errorf("b → %s (hostPort of a): %q", hostPortAddr, got)
	}
	// a through its own hostPort comes back over the same bridge port: hairpin mode and portmap's SNAT.
	if got := fetch(t, a.NetNSPath, hostPortAddr); got != "hello from a" {
		t.Errorf("a → %s (its own hostPort): %q", hostPortAddr, got)
	}

	// portmap made rules for a (hostPort DNAT): the check after Teardown is not empty-handed.
	if lines := iptablesLines(t, idA); !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, pluginChainName("DN-", idA)) }) {
		t.Errorf("no hostPort chain for a in iptables: %q", lines)
	}
	assertMasquerade(t, e.cfg.Bridge, e.cidr)

	ctx := context.Background()
	if err := e.m.Teardown(ctx, idA); err != nil {
		t.Fatalf("Teardown(a): %v", err)
	}
	if exists(a.NetNSPath) {
		t.Errorf("netns of a still exists")
	}
	if exists(e.ipamFile(a.IPs[0])) {
		t.Errorf("IP %s of a still reserved", a.IPs[0])
	}
	if n := e.bridgePorts(t); n != 1 {
		t.Errorf("%d links on the bridge after tearing a down, want 1", n)
	}
	assertNoIPTables(t, idA)
	if _, err := e.m.Status(idA); !errors.Is(err, ErrNotFound) {
		t.Errorf("Status(a) after Teardown = %v, want ErrNotFound", err)
	}
	if err := e.m.Teardown(ctx, idA); err != nil {
		t.Errorf("second Teardown(a): %v", err)
	}
	if err := e.m.Teardown(ctx, e.newID()); err != nil {
		t.Errorf("Teardown of an unknown sandbox: %v", err)
	}
	// b is untouched.
	if got := fetch(t, "", bAddr); got != "hello from b" {
		t.Errorf("host → b after tearing a down: %q", got)
	}
	if err := e.m.Teardown(ctx, idB); err != nil {
		t.Fatalf("Teardown(b): %v", err)
	}
	if exists(b.NetNSPath) || exists(e.ipamFile(b.IPs[0])) {
		t.Errorf("netns or IP of b left after Teardown")
	}
}

func TestTeardownAfterRestart(t *testing.T) {
	e := newTestEnv(t)
	id, res := e.setup(t, "survivor", PortMapping{ContainerPort: 80, HostPort: int32(freeHostPort(t))})

	// Setting the same sandbox up again fails and leaves its network alone.
	if _, err := e.m.Setup(context.Background(), Pod{SandboxID: id, Name: "survivor"}); err == nil {
		t.Error("a second Setup of the same sandbox succeeded")
	}
	if got, err := e.m.Status(id); err != nil || !slices.Equal(got.IPs, res.IPs) || ns.IsNSorErr(res.NetNSPath) != nil {
		t.Errorf("after a second Setup: Status = %+v, %v; netns %v", got, err, ns.IsNSorErr(res.NetNSPath))
	}

	// A new manager on the same directories: the state of the first one's sandboxes is on disk.
	m2, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Ready(); err != nil {
		t.Errorf("Ready() after restart: %v", err)
	}
	if got, err := m2.Status(id); err != nil || got.NetNSPath != res.NetNSPath || !slices.Equal(got.IPs, res.IPs) {
		t.Errorf("Status after restart = %+v, %v; want %+v", got, err, res)
	}
	other := netip.PrefixFrom(e.cidr.Addr().Next(), 24) // masks to the same subnet: still the same CIDR
	if err := m2.SetPodCIDR(other.String()); err != nil {
		t.Errorf("SetPodCIDR with the same subnet: %v", err)
	}
	if err := m2.SetPodCIDR("10.88.199.0/24"); err == nil {
		t.Error("changing the pod CIDR while a sandbox uses it succeeded")
	}
	if err := m2.Teardown(context.Background(), id); err != nil {
		t.Fatalf("Teardown after restart: %v", err)
	}
	if exists(res.NetNSPath) || exists(e.ipamFile(res.IPs[0])) {
		t.Errorf("netns or IP left after Teardown by the restarted manager")
	}
	assertNoIPTables(t, id)
	if err := m2.SetPodCIDR("10.88.199.0/24"); err != nil {
		t.Errorf("changing the pod CIDR once no sandbox uses it: %v", err)
	}
}

func TestSetupFailureUndoes(t *testing.T) {
	// The real bridge and host-local, and a portmap that fails ADD: the bridge's ADD has happened
	// (veth, IP, masquerade chain) when Setup fails, and all of it must be gone afterwards.
	needs.Root(t)
	real := needs.CNIPlugins(t)
	plugins := t.TempDir()
	for _, p := range []string{"bridge", "host-local"} {
		if err := os.Symlink(filepath.Join(real, p), filepath.Join(plugins, p)); err != nil {
			t.Fatal(err)
		}
	}
	failing := "#!/bin/sh\n[ \"$CNI_COMMAND\" = ADD ] || exit 0\n" +
		"echo '{\"cniVersion\":\"1.0.0\",\"code\":999,\"msg\":\"injected failure\"}'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(plugins, "portmap"), []byte(failing), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, plugins)
	id := e.newID()
	// A hostPort: a sandbox without one is set up without portmap.
	_, err := e.m.Setup(context.Background(), Pod{SandboxID: id, Namespace: "default", Name: "doomed", UID: "u",
		Ports: []PortMapping{{ContainerPort: 80, HostPort: int32(freeHostPort(t))}}})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Setup = %v, want the injected failure", err)
	}
	if exists(filepath.Join(e.cfg.NetNSDir, id)) {
		t.Error("netns left after a failed Setup")
	}
	if left, _ := os.ReadDir(filepath.Join(e.cfg.StateDir, "ipam", networkName)); slices.ContainsFunc(left, func(d os.DirEntry) bool {
		_, err := netip.ParseAddr(d.Name())
		return err == nil
	}) {
		t.Errorf("IP reservation left after a failed Setup: %v", left)
	}
	if n := e.bridgePorts(t); n != 0 {
		t.Errorf("%d veths on the bridge after a failed Setup", n)
	}
	assertNoIPTables(t, id)
	if _, err := e.m.Status(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Status after a failed Setup = %v, want ErrNotFound", err)
	}
}

func TestParallelSetupTeardown(t *testing.T) {
	e := newTestEnv(t)
	const pods = 4
	var wg sync.WaitGroup
	ips := make([]netip.Addr, pods)
	errs := make([]error, pods)
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				id := e.newID()
				res, err := e.m.Setup(context.Background(), Pod{SandboxID: id, Namespace: "par", Name: fmt.Sprint("p", i), UID: fmt.Sprint("u", i)})
				if err != nil {
					return err
				}
				ips[i] = res.IPs[0]
				if _, err := e.m.Status(id); err != nil {
					return err
				}
				return e.m.Teardown(context.Background(), id)
			}()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("pod %d: %v", i, err)
		}
	}
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		if seen[ip] {
			t.Errorf("IP %s handed out twice at once", ip)
		}
		seen[ip] = true
	}
}

func TestTeardownWhenNetNSIsGone(t *testing.T) {
	// After a reboot the namespace mount is gone and only the file is left; CRI runtimes then run
	// DEL with an empty netns path, which releases the IP.
	e := newTestEnv(t)
	id, res := e.setup(t, "rebooted")
	if err := unix.Unmount(res.NetNSPath, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Teardown(context.Background(), id); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if exists(res.NetNSPath) || exists(e.ipamFile(res.IPs[0])) {
		t.Errorf("netns file or IP left after Teardown")
	}
	if _, err := e.m.Status(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Status after Teardown = %v, want ErrNotFound", err)
	}
	// Without the namespace the bridge plugin cannot learn the pod's address, so it leaves its
	// masquerade rule; Teardown removes it by the sandbox ID in the rule's comment.
	out, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	if strings.Contains(string(out), id) || strings.Contains(string(out), pluginChainName("", id)) {
		t.Errorf("a nat rule or chain of sandbox %s is left after Teardown without its netns:\n%s", id, out)
	}
}

func TestCleanupTearsDownEverything(t *testing.T) {
	e := newTestEnv(t)
	_, a := e.setup(t, "a")
	_, b := e.setup(t, "b", PortMapping{ContainerPort: 80, HostPort: int32(freeHostPort(t))})
	if err := e.m.Cleanup(context.Background()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	for _, r := range []Result{a, b} {
		if exists(r.NetNSPath) || exists(e.ipamFile(r.IPs[0])) {
			t.Errorf("netns or IP of %s left after Cleanup", r.IPs[0])
		}
	}
	if _, err := netlink.LinkByName(e.cfg.Bridge); err == nil {
		t.Errorf("bridge %s left after Cleanup", e.cfg.Bridge)
	}
	if left, _ := os.ReadDir(filepath.Join(e.cfg.StateDir, "sandboxes")); len(left) > 0 {
		t.Errorf("sandbox records left after Cleanup: %v", left)
	}
	e.mu.Lock()
	ids := slices.Clone(e.ids)
	e.mu.Unlock()
	assertNoIPTables(t, ids...)
	if err := e.m.Cleanup(context.Background()); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	// The pod CIDR stays: a new sandbox can be set up again (and recreates the bridge).
	e.setup(t, "again")
}
