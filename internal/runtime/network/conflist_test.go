package network

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
)

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got)
}

func TestBuildConflistGolden(t *testing.T) {
	for _, tc := range []struct{ name, cidr string }{
		{"ipv4.conflist", "10.244.1.0/24"},
		{"dualstack.conflist", "10.244.1.0/24,fd00:10:244:1::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cidrs, err := parseCIDRs(tc.cidr)
			if err != nil {
				t.Fatal(err)
			}
			b, err := buildConflist("kubette0", cidrs, "/var/lib/kubette/runtime/cni/ipam")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b)
			back, err := conflistCIDRs(b)
			if err != nil {
				t.Fatal(err)
			}
			if formatCIDRs(back) != formatCIDRs(cidrs) {
				t.Errorf("CIDRs read back = %v, want %v", back, cidrs)
			}
		})
	}
}

func TestParseCIDRs(t *testing.T) {
	for in, want := range map[string]string{
		"10.88.1.0/24":                 "10.88.1.0/24",
		"10.88.1.7/24":                 "10.88.1.0/24", // masked
		" 10.88.1.0/24 , fd00::1/64":   "10.88.1.0/24,fd00::/64",
		"10.88.1.0/24,10.88.2.0/24":    "",
		"fd00::/64,fd01::/64":          "",
		"":                             "",
		"10.88.1.0":                    "",
		"10.88.1.0/24,not-a-prefix/24": "",
	} {
		got, err := parseCIDRs(in)
		if want == "" {
			if err == nil {
				t.Errorf("parseCIDRs(%q) = %v, want an error", in, got)
			}
			continue
		}
		if err != nil || formatCIDRs(got) != want {
			t.Errorf("parseCIDRs(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}

func TestPortMappings(t *testing.T) {
	got, err := portMappings([]PortMapping{
		{ContainerPort: 80, HostPort: 8080},
		{Protocol: "UDP", ContainerPort: 53, HostPort: 5353, HostIP: "127.0.0.1"},
		{Protocol: "TCP", ContainerPort: 9090}, // not published: left out
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []portMapEntry{
		{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
		{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("portMappings = %+v, want %+v", got, want)
	}
	for _, bad := range []PortMapping{
		{Protocol: "ICMP", ContainerPort: 1, HostPort: 1},
		{ContainerPort: 0, HostPort: 80},
		{ContainerPort: 80, HostPort: 70000},
		{ContainerPort: 80, HostPort: 80, HostIP: "localhost"},
	} {
		if _, err := portMappings([]PortMapping{bad}); err == nil {
			t.Errorf("portMappings(%+v) succeeded, want an error", bad)
		}
	}
}

func TestValidID(t *testing.T) {
	for _, ok := range []string{strings.Repeat("ab12", 16), "a", "Pod_1.x-y"} {
		if err := validID(ok); err != nil {
			t.Errorf("validID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../etc", "a/b", "-a", ".a", "a b", strings.Repeat("a", 129)} {
		if err := validID(bad); err == nil {
			t.Errorf("validID(%q) = nil, want an error", bad)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	dir := t.TempDir()
	for _, cfg := range []Config{
		{StateDir: "relative", NetNSDir: dir},
		{StateDir: dir, NetNSDir: ""},
		{StateDir: dir, NetNSDir: dir, Bridge: "much-too-long-bridge"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestReadyNamesWhatIsMissing(t *testing.T) {
	base := t.TempDir()
	empty := filepath.Join(base, "plugins")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{PluginDirs: []string{empty, "/nonexistent"}, StateDir: filepath.Join(base, "cni"), NetNSDir: filepath.Join(base, "netns")})
	if err != nil {
		t.Fatal(err)
	}
	want := "CNI plugin bridge not found in " + empty + ", /nonexistent: apt-get install -y containernetworking-plugins"
	if err := m.Ready(); err == nil || err.Error() != want {
		t.Errorf("Ready() = %v, want %q", err, want)
	}

	// With fake plugins in place, the missing pod CIDR is what Ready reports, until it is set.
	for _, p := range requiredPlugins {
		if err := os.WriteFile(filepath.Join(empty, p), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "no pod CIDR") {
		t.Errorf("Ready() = %v, want a missing pod CIDR", err)
	}
	if _, err := m.Setup(context.Background(), Pod{SandboxID: "early", Name: "p"}); err == nil || !strings.Contains(err.Error(), "no pod CIDR") {
		t.Errorf("Setup before SetPodCIDR = %v, want a missing pod CIDR", err)
	}
	if left, _ := os.ReadDir(m.cfg.NetNSDir); len(left) > 0 {
		t.Errorf("Setup without a pod CIDR left %v", left)
	}
	if err := m.SetPodCIDR("10.88.7.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); err != nil {
		t.Errorf("Ready() = %v after SetPodCIDR", err)
	}
	if err := m.SetPodCIDR("garbage"); err == nil {
		t.Error("SetPodCIDR(garbage) succeeded")
	}
	// No sandbox uses the CIDR yet, so it may change; a new manager on the same state reads it back.
	if err := m.SetPodCIDR("10.88.8.0/24"); err != nil {
		t.Fatal(err)
	}
	m2, err := New(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Ready(); err != nil {
		t.Errorf("Ready() of a restarted manager = %v", err)
	}
	if got := formatCIDRs(m2.cidrs); got != "10.88.8.0/24" {
		t.Errorf("restarted manager's pod CIDR = %s, want 10.88.8.0/24", got)
	}
	if _, err := m2.Status("unknown"); err == nil {
		t.Error("Status of an unknown sandbox succeeded")
	}
}

func TestWithoutPortmap(t *testing.T) {
	full, err := buildConflist("kb0", []netip.Prefix{netip.MustParsePrefix("10.88.9.0/24")}, "/ipam")
	if err != nil {
		t.Fatal(err)
	}
	b, err := withoutPortmap(full)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatalf("libcni rejects the conflist without portmap: %v\n%s", err, b)
	}
	if len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "bridge" || list.Name != networkName {
		t.Errorf("conflist without portmap = %s", b)
	}
	var want, got conflist
	if err := json.Unmarshal(full, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Plugins[0], want.Plugins[0]) {
		t.Errorf("bridge plugin changed: %+v, want %+v", got.Plugins[0], want.Plugins[0])
	}
	if cidrs, err := conflistCIDRs(b); err != nil || formatCIDRs(cidrs) != "10.88.9.0/24" {
		t.Errorf("CIDRs of the conflist without portmap = %v, %v", cidrs, err)
	}
}

func TestRecordedBridge(t *testing.T) {
	dir := t.TempDir()
	if b, err := RecordedBridge(dir); err != nil || b != "" {
		t.Fatalf("no conflist: %q, %v", b, err)
	}
	list, err := buildConflist("kbx7", []netip.Prefix{netip.MustParsePrefix("10.88.0.0/24")}, filepath.Join(dir, "ipam"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conflistPath(dir), list, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := RecordedBridge(dir); err != nil || b != "kbx7" {
		t.Fatalf("RecordedBridge = %q, %v; want kbx7", b, err)
	}
	for _, bad := range []string{"{", `{"plugins":[{"type":"portmap"}]}`} {
		if err := os.WriteFile(conflistPath(dir), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := RecordedBridge(dir); err == nil {
			t.Errorf("conflist %q: bridge %q and no error", bad, b)
		}
	}
}
