package iptables

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/testenv/needs"
)

// TestSaveFormMatchesIptables applies rendered rulesets (every golden case,
// random models, with and without the unrouted pod CIDR guard and with
// NodeIPs or addrtype NodePorts) with the real iptables-restore in a network
// namespace of its own and checks that a full sync against the real
// iptables-save output then writes nothing: SaveForm predicts every rule the
// renderer writes, and the hooks are found in the saved built-in chains.
func TestSaveFormMatchesIptables(t *testing.T) {
	needs.Root(t)
	models := map[string]Model{}
	for name, m := range goldenCases() {
		models[name] = m
	}
	for seed := range uint64(40) {
		models[fmt.Sprint("random-", seed)] = randomModel(rand.New(rand.NewPCG(seed, 23)))
	}
	noNodeIPs := testOptions
	noNodeIPs.NodeIPs = nil
	guarded := testOptions
	guarded.RejectUnroutedPodCIDR = true
	guarded.NodePodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/22"), netip.MustParsePrefix("10.244.9.0/24")}
	guarded.RoutedPodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.3.0/24")}
	for i, o := range []Options{testOptions, noNodeIPs, guarded} {
		_, runNs := rootNetns(t, fmt.Sprint("saveform-", i))
		run := func(stdin []byte, args ...string) []byte {
			t.Helper()
			out, err := runNs(stdin, args...)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		var prev *Ruleset
		for name, m := range models {
			rs := NewRenderer().Render(m, o)
			var stale map[string][]string
			if prev != nil {
				stale = StaleChains(prev.Text(nil), rs)
			}
			run(rs.Text(stale), "iptables-restore", "--noflush")
			if prev == nil { // the chains exist now: hook them in (the guard last, so first)
				for _, h := range append(Hooks(), GuardHooks()...) {
					run(nil, append([]string{"iptables", "-t", h.Table, "-I", h.Chain, "1"}, h.Args...)...)
				}
			}
			prev = rs
			var text []byte
			for _, table := range []string{TableFilter, TableNAT} {
				text = append(text, run(nil, "iptables-save", "-t", table)...)
			}
			saved, err := ParseSave(text)
			if err != nil {
				t.Fatal(err)
			}
			batches, st := rs.FullSyncBatches(saved, 0)
			if batches != nil || st.Unpredicted != 0 {
				t.Errorf("options %d, %s: a full sync over the applied rules writes %+v:\n%s\nsaved:\n%s", i, name, st, bytes.Join(batches, nil), text)
			}
			for _, h := range Hooks() {
				if !saved.HasRule(h.Table, h.Chain, h.Args) {
					t.Errorf("the saved %s %s lacks the hook %s:\n%s", h.Table, h.Chain, strings.Join(h.Args, " "), text)
				}
			}
			for _, h := range GuardHooks() {
				if !saved.HasRule(h.Table, h.Chain, h.Args) || !saved.FirstRuleJumpsTo(h.Table, h.Chain, ChainGuard) {
					t.Errorf("the saved %s %s does not start with the guard", h.Table, h.Chain)
				}
			}
		}
	}
}
