package network

import (
	"slices"
	"testing"
)

func TestPortmapRules(t *testing.T) {
	save := []byte(`*nat
:PREROUTING ACCEPT [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-MASQ - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
-A KUBE-SERVICES -j KUBE-NODEPORTS
COMMIT
`)
	jumps, chains, busy := portmapRules(save)
	if busy {
		t.Fatal("no CNI-DN chain, yet busy")
	}
	if !slices.Equal(chains, []string{"CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-MASQ"}) {
		t.Errorf("chains = %v", chains)
	}
	want := [][]string{
		{"PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
		{"POSTROUTING", "-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", "CNI-HOSTPORT-MASQ"},
	}
	if !slices.EqualFunc(jumps, want, slices.Equal) {
		t.Errorf("jumps = %q, want %q", jumps, want)
	}
	if _, _, busy := portmapRules(append(save, []byte(":CNI-DN-abc - [0:0]\n")...)); !busy {
		t.Error("a sandbox chain must keep the shared chains")
	}
}

func TestSandboxRules(t *testing.T) {
	id := "7e6c85d290050f17fdab8a922fc96393b1b28bf2eb42f12efb791805c51e03de"
	other := "379e72ba6f402bfeb81e106377dc9cdaedb0f7cc5e87175ce0bbe8ce19162cf4"
	save := []byte(`*nat
:CNI-9650f8683de71447928dd9c4 - [0:0]
:CNI-fe331ef5f2fdbabf71d986e9 - [0:0]
-A POSTROUTING -s 10.244.0.6/32 -m comment --comment "name: \"kubette\" id: \"` + id + `\"" -j CNI-9650f8683de71447928dd9c4
-A POSTROUTING -s 10.244.0.11/32 -m comment --comment "name: \"kubette\" id: \"` + other + `\"" -j CNI-fe331ef5f2fdbabf71d986e9
-A CNI-9650f8683de71447928dd9c4 -d 10.244.0.0/24 -m comment --comment "name: \"kubette\" id: \"` + id + `\"" -j ACCEPT
-A CNI-9650f8683de71447928dd9c4 ! -d 224.0.0.0/4 -m comment --comment "name: \"kubette\" id: \"` + id + `\"" -j MASQUERADE
-A CNI-fe331ef5f2fdbabf71d986e9 -d 10.244.0.0/24 -m comment --comment "name: \"kubette\" id: \"` + other + `\"" -j ACCEPT
COMMIT
`)
	rules, chains := sandboxRules(save, id)
	if !slices.Equal(chains, []string{"CNI-9650f8683de71447928dd9c4"}) {
		t.Errorf("chains = %v", chains)
	}
	want := [][]string{{"POSTROUTING", "-s", "10.244.0.6/32", "-m", "comment", "--comment", `name: "kubette" id: "` + id + `"`, "-j", "CNI-9650f8683de71447928dd9c4"}}
	if !slices.EqualFunc(rules, want, slices.Equal) {
		t.Errorf("rules = %q, want %q", rules, want)
	}
}

// TestSandboxRulesAloneInPostrouting: when the sandbox's jump is POSTROUTING's only rule,
// the jump is still deleted (its chain cannot go while the jump is there).
func TestSandboxRulesAloneInPostrouting(t *testing.T) {
	id := "7e6c85d290050f17fdab8a922fc96393b1b28bf2eb42f12efb791805c51e03de"
	save := []byte(`*nat
:CNI-9650f8683de71447928dd9c4 - [0:0]
-A POSTROUTING -s 10.244.0.6/32 -m comment --comment "name: \"kubette\" id: \"` + id + `\"" -j CNI-9650f8683de71447928dd9c4
-A CNI-9650f8683de71447928dd9c4 -d 10.244.0.0/24 -m comment --comment "name: \"kubette\" id: \"` + id + `\"" -j ACCEPT
COMMIT
`)
	rules, chains := sandboxRules(save, id)
	if !slices.Equal(chains, []string{"CNI-9650f8683de71447928dd9c4"}) {
		t.Errorf("chains = %v", chains)
	}
	want := [][]string{{"POSTROUTING", "-s", "10.244.0.6/32", "-m", "comment", "--comment", `name: "kubette" id: "` + id + `"`, "-j", "CNI-9650f8683de71447928dd9c4"}}
	if !slices.EqualFunc(rules, want, slices.Equal) {
		t.Errorf("rules = %q, want %q", rules, want)
	}
}
