package network

import (
	"context"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestParseMasq(t *testing.T) {
	save := []byte(`*nat
:POSTROUTING ACCEPT [0:0]
:KUBETTE-MASQ-kb0 - [0:0]
:KUBETTE-MASQ-kb01 - [0:0]
-A POSTROUTING -s 10.88.9.0/24 -m comment --comment "kubette: masquerade the pods of bridge kb0" -j KUBETTE-MASQ-kb0
-A POSTROUTING -s 10.88.7.0/24 -m comment --comment "kubette: masquerade the pods of bridge kb0" -j KUBETTE-MASQ-kb0
-A POSTROUTING -s 10.88.8.0/24 -j KUBETTE-MASQ-kb01
-A KUBETTE-MASQ-kb0 -d 10.88.9.0/24 -m comment --comment "kubette: masquerade the pods of bridge kb0" -j ACCEPT
-A KUBETTE-MASQ-kb0 ! -d 224.0.0.0/4 -m comment --comment "kubette: masquerade the pods of bridge kb0" -j MASQUERADE
-A KUBETTE-MASQ-kb01 -j MASQUERADE
COMMIT
`)
	st := parseMasq(save, "kb0")
	if !st.chainExists || st.chainRules != 2 {
		t.Errorf("chain exists %v with %d rules, want true with 2", st.chainExists, st.chainRules)
	}
	want := [][]string{
		{"POSTROUTING", "-s", "10.88.9.0/24", "-m", "comment", "--comment", "kubette: masquerade the pods of bridge kb0", "-j", "KUBETTE-MASQ-kb0"},
		{"POSTROUTING", "-s", "10.88.7.0/24", "-m", "comment", "--comment", "kubette: masquerade the pods of bridge kb0", "-j", "KUBETTE-MASQ-kb0"},
	}
	if !slices.EqualFunc(st.jumps, want, slices.Equal) {
		t.Errorf("jumps = %q, want %q", st.jumps, want)
	}
	jump, _ := masqRules(familyV4, "kb0", netip.MustParsePrefix("10.88.9.0/24"))
	if !slices.Equal(jump, want[0]) {
		t.Errorf("masqRules jump = %q; iptables-save prints %q", jump, want[0])
	}
	if st := parseMasq(save, "kb1"); st.chainExists || len(st.jumps) > 0 || st.chainRules > 0 {
		t.Errorf("another bridge's state = %+v", st)
	}
	if n := len(masqChain("abcdefghijklmno")); n > 28 {
		t.Errorf("the chain of a 15-character bridge has %d characters, more than iptables takes", n)
	}
}

// masqLines returns the iptables-save lines of the nat table that name the bridge's masquerade chain.
func masqLines(t testing.TB, bridge string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, masqChain(bridge)) {
			lines = append(lines, l)
		}
	}
	return lines
}

// assertMasquerade fails the test unless the bridge's masquerade is exactly the rules for cidr.
func assertMasquerade(t *testing.T, bridge string, cidr netip.Prefix) {
	t.Helper()
	jump, chain := masqRules(familyV4, bridge, cidr)
	for _, r := range append([][]string{jump}, chain...) {
		if !iptablesCheck(context.Background(), familyV4, r) {
			t.Errorf("no rule %q", r)
		}
	}
	// The chain's declaration, its jump and its two rules.
	if lines := masqLines(t, bridge); len(lines) != 4 {
		t.Errorf("masquerade of %s in iptables-save:\n%s\nwant the chain, one jump and two rules", bridge, strings.Join(lines, "\n"))
	}
}

func TestOneMasqueradeForThePodCIDR(t *testing.T) {
	e := newTestEnv(t)
	idA, _ := e.setup(t, "a")
	idB, _ := e.setup(t, "b")
	assertMasquerade(t, e.cfg.Bridge, e.cidr)
	// The bridge plugin made no chain of its own for the sandboxes.
	for _, id := range []string{idA, idB} {
		if lines := iptablesLines(t, id); len(lines) > 0 {
			t.Errorf("iptables mentions sandbox %s: %q", id, lines)
		}
	}

	// A restarted manager checks the rules and keeps them.
	m2, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.ensureMasquerade(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertMasquerade(t, e.cfg.Bridge, e.cidr)

	// A chain someone emptied is rebuilt by the next manager.
	if err := iptables(context.Background(), familyV4, "-F", masqChain(e.cfg.Bridge)); err != nil {
		t.Fatal(err)
	}
	m3, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m3.ensureMasquerade(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertMasquerade(t, e.cfg.Bridge, e.cidr)

	// Another pod CIDR (once no sandbox uses the old one) moves the masquerade along.
	for _, id := range []string{idA, idB} {
		if err := e.m.Teardown(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	other := netip.MustParsePrefix("10.88.199.0/24")
	if err := e.m.SetPodCIDR(other.String()); err != nil {
		t.Fatal(err)
	}
	if err := e.m.ensureMasquerade(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertMasquerade(t, e.cfg.Bridge, other)

	if err := RemoveMasquerade(context.Background(), e.cfg.Bridge); err != nil {
		t.Fatal(err)
	}
	if lines := masqLines(t, e.cfg.Bridge); len(lines) > 0 {
		t.Errorf("RemoveMasquerade left:\n%s", strings.Join(lines, "\n"))
	}
	if err := RemoveMasquerade(context.Background(), e.cfg.Bridge); err != nil {
		t.Errorf("second RemoveMasquerade: %v", err)
	}
}

// A sandbox set up by an earlier version, whose conflist has the bridge plugin masquerade,
// loses the plugin's chain on Teardown: its DEL runs with the conflist of its record.
func TestTeardownOfAnOldIPMasqSandbox(t *testing.T) {
	e := newTestEnv(t)
	old := strings.Replace(string(e.m.conflist), `"hairpinMode": true,`, `"hairpinMode": true, "ipMasq": true,`, 1)
	if old == string(e.m.conflist) {
		t.Fatalf("conflist has no hairpinMode to add ipMasq after:\n%s", e.m.conflist)
	}
	e.m.mu.Lock()
	e.m.conflist = []byte(old)
	e.m.mu.Unlock()
	id, _ := e.setup(t, "old")
	if lines := iptablesLines(t, id); !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, pluginChainName("", id)) }) {
		t.Fatalf("the old conflist made no masquerade chain for the sandbox: %q", lines)
	}
	if err := e.m.Teardown(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	assertNoIPTables(t, id)
}
