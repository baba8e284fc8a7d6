package network

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// The pods of a bridge reach addresses off the pod network through the node's address: one
// nat chain per bridge and IP family, KUBETTE-MASQ-<bridge>, set up once for the whole pod
// CIDR instead of the bridge plugin's ipMasq, which makes a chain of its own per sandbox (about
// ten iptables processes on every sandbox's ADD and five on its DEL). The chain does what the
// plugin's does: traffic to the pod CIDR is left alone, everything else but multicast is
// masqueraded; POSTROUTING jumps to it for sources in the pod CIDR.

// masqChainPrefix starts the name of a bridge's masquerade chain.
const masqChainPrefix = "KUBETTE-MASQ-"

// masqChain is the masquerade chain of a bridge: at most 28 characters, as iptables allows,
// since bridge names have at most 15.
func masqChain(bridge string) string { return masqChainPrefix + bridge }

// masqComment marks every rule of a bridge's masquerade.
func masqComment(bridge string) string { return "kubette: masquerade the pods of bridge " + bridge }

// ipFamily is iptables or ip6tables, with the multicast range traffic is never masqueraded to.
type ipFamily struct {
	iptables, save string
	multicast      string
	is6            bool
}

var (
	familyV4 = ipFamily{iptables: "iptables", save: "iptables-save", multicast: "224.0.0.0/4"}
	familyV6 = ipFamily{iptables: "ip6tables", save: "ip6tables-save", multicast: "ff00::/8", is6: true}
)

// masqRules are the rules, as iptables -A/-C/-D arguments, of a bridge's masquerade for one
// pod CIDR: the POSTROUTING jump, then the chain's two rules. It is a pure function.
func masqRules(f ipFamily, bridge string, cidr netip.Prefix) (jump []string, chain [][]string) {
	c, comment := masqChain(bridge), masqComment(bridge)
	jump = []string{"POSTROUTING", "-s", cidr.String(), "-m", "comment", "--comment", comment, "-j", c}
	chain = [][]string{
		{c, "-d", cidr.String(), "-m", "comment", "--comment", comment, "-j", "ACCEPT"},
		{c, "!", "-d", f.multicast, "-m", "comment", "--comment", comment, "-j", "MASQUERADE"},
	}
	return jump, chain
}

// masqState is what iptables-save output of the nat table says about a bridge's masquerade:
// the rules of other chains that jump to its chain (as iptables -D arguments), whether the
// chain exists, and how many rules it holds.
type masqState struct {
	jumps       [][]string
	chainExists bool
	chainRules  int
}

// parseMasq reads iptables-save output of the nat table for the masquerade chain of bridge.
func parseMasq(save []byte, bridge string) masqState {
	c := masqChain(bridge)
	var st masqState
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 && f[0] == c {
				st.chainExists = true
			}
		case strings.HasPrefix(line, "-A "):
			f := splitRule(line[3:])
			if len(f) == 0 {
				continue
			}
			if f[0] == c {
				st.chainRules++
				continue
			}
			for i := 0; i+1 < len(f); i++ {
				if (f[i] == "-j" || f[i] == "-g") && f[i+1] == c {
					st.jumps = append(st.jumps, f)
					break
				}
			}
		}
	}
	return st
}

// ensureMasquerade makes the masquerade of bridge cover exactly cidrs (at most one per IP
// family): the rules already in place are checked and kept, so traffic of running pods is
// never left unmasqueraded; anything else (another CIDR, a partial chain) is rebuilt.
func ensureMasquerade(ctx context.Context, bridge string, cidrs []netip.Prefix) error {
	var errs []error
	for _, f := range []ipFamily{familyV4, familyV6} {
		var want *netip.Prefix
		for _, p := range cidrs {
			if p.Addr().Is6() == f.is6 {
				want = &p
			}
		}
		if want == nil {
			errs = append(errs, removeMasqueradeFamily(ctx, f, bridge))
			continue
		}
		errs = append(errs, ensureMasqueradeFamily(ctx, f, bridge, *want))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod masquerade of bridge %s: %w", bridge, err)
	}
	return nil
}

func ensureMasqueradeFamily(ctx context.Context, f ipFamily, bridge string, cidr netip.Prefix) error {
	if _, err := exec.LookPath(f.iptables); err != nil {
		return fmt.Errorf("%s not found: apt-get install -y iptables", f.iptables)
	}
	save, err := iptablesSave(ctx, f)
	if err != nil {
		return err
	}
	jump, chain := masqRules(f, bridge, cidr)
	st := parseMasq(save, bridge)
	if st.chainExists && len(st.jumps) == 1 && st.chainRules == len(chain) &&
		iptablesCheck(ctx, f, jump) && iptablesCheck(ctx, f, chain[0]) && iptablesCheck(ctx, f, chain[1]) {
		return nil
	}
	for _, j := range st.jumps {
		if err := iptables(ctx, f, append([]string{"-D"}, j...)...); err != nil {
			return err
		}
	}
	op := "-N"
	if st.chainExists {
		op = "-F"
	}
	if err := iptables(ctx, f, op, masqChain(bridge)); err != nil {
		return err
	}
	for _, r := range chain {
		if err := iptables(ctx, f, append([]string{"-A"}, r...)...); err != nil {
			return err
		}
	}
	return iptables(ctx, f, append([]string{"-A"}, jump...)...)
}

// RemoveMasquerade deletes the masquerade chain of bridge and every jump to it, in both IP
// families; what is not there is no error, nor is a missing iptables.
func RemoveMasquerade(ctx context.Context, bridge string) error {
	err := errors.Join(removeMasqueradeFamily(ctx, familyV4, bridge), removeMasqueradeFamily(ctx, familyV6, bridge))
	if err != nil {
		return fmt.Errorf("remove the pod masquerade of bridge %s: %w", bridge, err)
	}
	return nil
}

func removeMasqueradeFamily(ctx context.Context, f ipFamily, bridge string) error {
	if _, err := exec.LookPath(f.save); err != nil {
		return nil // no iptables of this family: no rules either
	}
	save, err := iptablesSave(ctx, f)
	if err != nil {
		return err
	}
	st := parseMasq(save, bridge)
	var errs []error
	for _, j := range st.jumps {
		errs = append(errs, iptables(ctx, f, append([]string{"-D"}, j...)...))
	}
	if st.chainExists {
		errs = append(errs, iptables(ctx, f, "-F", masqChain(bridge)), iptables(ctx, f, "-X", masqChain(bridge)))
	}
	return errors.Join(errs...)
}

// iptablesSave returns the family's nat table as iptables-save prints it.
func iptablesSave(ctx context.Context, f ipFamily) ([]byte, error) {
	out, err := exec.CommandContext(ctx, f.save, "-t", "nat").Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t nat: %w", f.save, err)
	}
	return out, nil
}

// iptables runs one command on the family's nat table.
func iptables(ctx context.Context, f ipFamily, args ...string) error {
	full := append([]string{"-w", "-t", "nat"}, args...)
	if out, err := exec.CommandContext(ctx, f.iptables, full...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", f.iptables, strings.Join(full, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// iptablesCheck tells whether the nat table holds the rule (iptables -C).
func iptablesCheck(ctx context.Context, f ipFamily, rule []string) bool {
	return iptables(ctx, f, append([]string{"-C"}, rule...)...) == nil
}
