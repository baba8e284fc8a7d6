package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// fakeHost is a Runner that keeps the filter and nat tables in memory with
// iptables-restore --noflush semantics, and records what was applied.
type fakeHost struct {
	mu sync.Mutex
	// chains maps table → chain → rules (the text after "-A CHAIN ").
	chains map[string]map[string][]string
	// order keeps the chains' creation order per table for Save.
	order    map[string][]string
	restores []string
	// failRestores makes the next n restores fail.
	failRestores int
	conntrack    [][]string
}

var builtins = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

func newFakeHost() *fakeHost {
	h := &fakeHost{chains: map[string]map[string][]string{}, order: map[string][]string{}}
	for t, cs := range builtins {
		h.chains[t] = map[string][]string{}
		for _, c := range cs {
			h.chains[t][c] = nil
			h.order[t] = append(h.order[t], c)
		}
	}
	return h
}

type exitErr int

func (e exitErr) Error() string { return "exit status " + strconv.Itoa(int(e)) }
func (e exitErr) ExitCode() int { return int(e) }

func (h *fakeHost) Restore(_ context.Context, data []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failRestores > 0 {
		h.failRestores--
		return errors.New("iptables-restore: injected failure")
	}
	// Apply to a copy: a restore is atomic.
	next := map[string]map[string][]string{}
	for t, cs := range h.chains {
		next[t] = map[string][]string{}
		for c, r := range cs {
			next[t][c] = slices.Clone(r)
		}
	}
	order := map[string][]string{}
	for t, o := range h.order {
		order[t] = slices.Clone(o)
	}
	table := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "" || line == "COMMIT":
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if _, ok := next[table][name]; !ok {
				order[table] = append(order[table], name)
			}
			next[table][name] = nil
		case strings.HasPrefix(line, "-A "):
			chain, rule, _ := strings.Cut(line[3:], " ")
			if _, ok := next[table][chain]; !ok {
				return fmt.Errorf("iptables-restore: chain %s does not exist", chain)
			}
			next[table][chain] = append(next[table][chain], rule)
		case strings.HasPrefix(line, "-D "):
			chain, rule, _ := strings.Cut(line[3:], " ")
			i := slices.Index(next[table][chain], rule)
			if i < 0 {
				return fmt.Errorf("iptables-restore: no rule %q in %s", rule, chain)
			}
			next[table][chain] = slices.Delete(next[table][chain], i, i+1)
		case strings.HasPrefix(line, "-X "):
			name := line[3:]
			for c, rules := range next[table] {
				for _, r := range rules {
					if jumpTarget(r) == name {
						return fmt.Errorf("iptables-restore: -X %s: still referenced from %s", name, c)
					}
				}
			}
			delete(next[table], name)
			order[table] = slices.DeleteFunc(order[table], func(s string) bool { return s == name })
		default:
			return fmt.Errorf("iptables-restore: bad line %q", line)
		}
	}
	// Every jump must go to an existing chain.
	for t, cs := range next {
		for c, rules := range cs {
			for _, r := range rules {
				if j := jumpTarget(r); strings.HasPrefix(j, "KUBE-") {
					if _, ok := next[t][j]; !ok {
						return fmt.Errorf("iptables-restore: %s %s jumps to missing %s", t, c, j)
					}
				}
			}
		}
	}
	h.chains, h.order = next, order
	h.restores = append(h.restores, string(data))
	return nil
}

func jumpTarget(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" {
			return f[i+1]
		}
	}
	return ""
}

func (h *fakeHost) Save(context.Context) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, t := range []string{"filter", "nat"} {
		b.WriteString("*" + t + "\n")
		for _, c := range h.order[t] {
			policy := "-"
			if slices.Contains(builtins[t], c) {
				policy = "ACCEPT"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
		}
		for _, c := range h.order[t] {
			for _, r := range h.chains[t][c] {
				fmt.Fprintf(&b, "-A %s %s\n", c, r)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return []byte(b.String()), nil
}

// quoteArgs joins args as iptables-save prints them.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func (h *fakeHost) Iptables(_ context.Context, args ...string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(args) < 4 || args[0] != "-t" {
		return nil, fmt.Errorf("fake iptables: unsupported %v", args)
	}
	table, op, chain, rest := args[1], args[2], args[3], args[4:]
	rules, ok := h.chains[table][chain]
	if !ok {
		return nil, exitErr(1)
	}
	switch op {
	case "-C":
		if slices.Contains(rules, quoteArgs(rest)) {
			return nil, nil
		}
		return nil, exitErr(1)
	case "-I":
		pos, err := strconv.Atoi(rest[0])
		if err != nil || pos < 1 || pos > len(rules)+1 {
			return nil, exitErr(1)
		}
		h.chains[table][chain] = slices.Insert(rules, pos-1, quoteArgs(rest[1:]))
		return nil, nil
	case "-S":
		n, _ := strconv.Atoi(rest[0])
		if n < 1 || n > len(rules) {
			return nil, nil
		}
		return []byte("-A " + chain + " " + rules[n-1] + "\n"), nil
	}
	return nil, fmt.Errorf("fake iptables: unsupported %v", args)
}

func (h *fakeHost) Conntrack(_ context.Context, args ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conntrack = append(h.conntrack, args)
	return nil
}

// rules returns a copy of one chain's rules.
func (h *fakeHost) rules(table, chain string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.chains[table][chain])
}

// chainNames returns the chains of a table with the prefix.
func (h *fakeHost) chainNames(table, prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for c := range h.chains[table] {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func (h *fakeHost) restoreCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.restores)
}
