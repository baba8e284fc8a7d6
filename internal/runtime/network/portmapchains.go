package network

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// The portmap plugin keeps shared chains (CNI-HOSTPORT-*) and their jumps from the built-in
// chains of the nat table after the last sandbox's DEL, since other CNI users may share them.
// removeIdlePortmapChains deletes them once no sandbox chain (CNI-DN-*) is left, so that
// `kubette down` leaves no rule behind.
func removeIdlePortmapChains(ctx context.Context) error {
	return withPortmapLock(true, func() error { return removeIdlePortmapChainsLocked(ctx) })
}

func removeIdlePortmapChainsLocked(ctx context.Context) error {
	save, err := exec.LookPath("iptables-save")
	if err != nil {
		return nil // no iptables: the plugin made no chains either
	}
	out, err := exec.CommandContext(ctx, save, "-t", "nat").Output()
	if err != nil {
		return fmt.Errorf("iptables-save -t nat: %w", err)
	}
	jumps, chains, busy := portmapRules(out)
	if busy || len(chains) == 0 {
		return nil
	}
	var errs []error
	for _, rule := range jumps {
		args := append([]string{"-w", "-t", "nat", "-D"}, rule...)
		if o, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(o)))
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range chains {
			if o, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", op, c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("iptables -t nat %s %s: %w: %s", op, c, err, bytes.TrimSpace(o)))
			}
		}
	}
	return errors.Join(errs...)
}

// portmapRules reads iptables-save output of the nat table: the rules of other chains that
// jump to a CNI-HOSTPORT-* chain (as iptables -D arguments), the CNI-HOSTPORT-* chains, and
// whether a sandbox's CNI-DN-* chain still exists.
func portmapRules(save []byte) (jumps [][]string, chains []string, busy bool) {
	sc := bufio.NewScanner(bytes.NewReader(save))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":CNI-DN-"):
			busy = true
		case strings.HasPrefix(line, ":CNI-HOSTPORT-"):
			chains = append(chains, strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-A "):
			f := splitRule(line[3:])
			if len(f) == 0 || strings.HasPrefix(f[0], "CNI-HOSTPORT-") {
				continue
			}
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "-j" && strings.HasPrefix(f[i+1], "CNI-HOSTPORT-") {
					jumps = append(jumps, f)
					break
				}
			}
		}
	}
	return jumps, chains, busy
}

// splitRule splits an iptables-save rule into arguments, keeping quoted strings (comments)
// whole, without their quotes and with their backslash escapes resolved.
func splitRule(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && inQuote && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQuote = !inQuote
			have = true
		case c == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// removeSandboxRules deletes the nat rules and chains that still name a sandbox in their
// comment (`id: "<sandbox id>"`). The bridge plugin's DEL leaves its masquerade rule behind
// when the sandbox's network namespace is already gone (it needs the namespace to find the
// pod's address); this removes it by the ID the plugin wrote into the comment.
func removeSandboxRules(ctx context.Context, sandboxID string) error {
	save, err := exec.LookPath("iptables-save")
	if err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, save, "-t", "nat").Output()
	if err != nil {
		return fmt.Errorf("iptables-save -t nat: %w", err)
	}
	rules, chains := sandboxRules(out, sandboxID)
	var errs []error
	for _, rule := range rules {
		args := append([]string{"-w", "-t", "nat", "-D"}, rule...)
		if o, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(o)))
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range chains {
			if o, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", op, c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("iptables -t nat %s %s: %w: %s", op, c, err, bytes.TrimSpace(o)))
			}
		}
	}
	return errors.Join(errs...)
}

// sandboxRules returns, from iptables-save output of the nat table, the rules of built-in or
// shared chains whose comment names sandboxID (as iptables -D arguments) and the chains they
// jump to whose every rule names it too (the plugin's per-sandbox chains).
func sandboxRules(save []byte, sandboxID string) (rules [][]string, chains []string) {
	tag := `id: "` + sandboxID + `"`
	own := map[string]bool{}  // chains whose rules all name the sandbox
	seen := map[string]bool{} // chains with rules
	var named [][]string
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		f := splitRule(line[3:])
		if len(f) == 0 {
			continue
		}
		chain := f[0]
		mentions := strings.Contains(strings.ReplaceAll(line, `\"`, `"`), tag)
		if !seen[chain] {
			seen[chain] = true
			own[chain] = mentions
		} else if !mentions {
			own[chain] = false
		}
		if mentions {
			named = append(named, f)
		}
	}
	for _, f := range named {
		// A rule in a shared chain goes and its chain stays; so for a built-in chain even when
		// the sandbox's rule is all it holds (as POSTROUTING once no portmap rule is there).
		if !own[f[0]] || !strings.HasPrefix(f[0], "CNI-") {
			rules = append(rules, f)
		}
	}
	for c, all := range own {
		if all && strings.HasPrefix(c, "CNI-") {
			chains = append(chains, c)
		}
	}
	slices.Sort(chains)
	return rules, chains
}

// portmapLockPath is the host-wide lock between setting up sandboxes (shared: the portmap
// plugin creates the shared chains before the sandbox's own CNI-DN-* chain) and
// removeIdlePortmapChains (exclusive), across every kubette process on the machine: without
// it a cleanup in another process could delete the shared chains between the two steps.
const portmapLockPath = "/run/kubette-portmap.lock"

// withPortmapLock runs f holding the portmap lock (shared or exclusive). Without a lock
// file (not root) f runs unlocked: such a process cannot change iptables either.
func withPortmapLock(exclusive bool, f func() error) error {
	file, err := os.OpenFile(portmapLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return f()
	}
	defer file.Close()
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(file.Fd()), how); err != nil {
		return f()
	}
	defer func() { _ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN) }()
	return f()
}
