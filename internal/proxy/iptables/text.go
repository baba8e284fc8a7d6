package iptables

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
)

// Text is the full iptables-restore input for r (to be applied with
// --noflush): every chain declared (which flushes it) and written, then the
// stale chains, flushed and deleted. stale maps a table name to chain names
// that exist on the host but not in r (see StaleChains).
func (r *Ruleset) Text(stale map[string][]string) []byte {
	var b bytes.Buffer
	b.Grow(r.size())
	for _, t := range []string{TableFilter, TableNAT} {
		writeTable(&b, t, r.Table(t), stale[t])
	}
	return b.Bytes()
}

func (r *Ruleset) size() int {
	n := 64
	for _, cs := range [][]Chain{r.Filter, r.NAT} {
		for _, c := range cs {
			n += 2*len(c.Name) + 16
			for _, rule := range c.Rules {
				n += len(c.Name) + len(rule) + 5
			}
		}
	}
	return n
}

func writeTable(b *bytes.Buffer, table string, chains []Chain, deleted []string) {
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		b.WriteString(":" + c.Name + " - [0:0]\n")
	}
	for _, name := range deleted {
		b.WriteString(":" + name + " - [0:0]\n")
	}
	for _, c := range chains {
		for _, rule := range c.Rules {
			b.WriteString("-A ")
			b.WriteString(c.Name)
			b.WriteByte(' ')
			b.WriteString(rule)
			b.WriteByte('\n')
		}
	}
	for _, name := range deleted {
		b.WriteString("-X " + name + "\n")
	}
	b.WriteString("COMMIT\n")
}

// GuardText is the iptables-restore input that creates (or refreshes) only
// the guard chain, applied at start before anything else.
func GuardText(o Options) []byte {
	var b bytes.Buffer
	writeTable(&b, TableFilter, []Chain{Guard(o)}, nil)
	return b.Bytes()
}

// Update is the partial iptables-restore input that turns the rules of prev
// (as applied) into next: only the chains whose rules changed are declared and
// rewritten, the chains gone are flushed and deleted, unchanged chains are
// left alone (--noflush). It returns nil when nothing changed. Applying it to
// a host holding prev leaves exactly what next.Text would.
func Update(prev, next *Ruleset) []byte {
	var b bytes.Buffer
	for _, t := range []string{TableFilter, TableNAT} {
		old := make(map[string][]string, len(prev.Table(t)))
		for _, c := range prev.Table(t) {
			old[c.Name] = c.Rules
		}
		var changed []Chain
		for _, c := range next.Table(t) {
			rules, ok := old[c.Name]
			if !ok || !slices.Equal(rules, c.Rules) {
				changed = append(changed, c)
			}
			delete(old, c.Name)
		}
		if len(changed) == 0 && len(old) == 0 {
			continue
		}
		var gone []string
		for _, c := range prev.Table(t) {
			if _, ok := old[c.Name]; ok {
				gone = append(gone, c.Name)
			}
		}
		writeTable(&b, t, changed, gone)
	}
	if b.Len() == 0 {
		return nil
	}
	return b.Bytes()
}

// Owned reports whether kubette's proxy owns a chain of this name.
func Owned(name string) bool {
	switch name {
	case ChainServices, ChainExternalServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq, ChainForward, ChainGuard:
		return true
	}
	return strings.HasPrefix(name, PrefixSVC) || strings.HasPrefix(name, PrefixSEP) || strings.HasPrefix(name, PrefixEXT)
}

// SavedChains parses iptables-save output into table → chain names, in order.
func SavedChains(saved []byte) map[string][]string {
	out := map[string][]string{}
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(saved))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			out[table] = append(out[table], name)
		}
	}
	return out
}

// StaleChains returns, per table, the chains kubette owns that iptables-save
// output shows on the host but r does not have: a full sync deletes them.
func StaleChains(saved []byte, r *Ruleset) map[string][]string {
	out := map[string][]string{}
	for table, names := range SavedChains(saved) {
		if table != TableFilter && table != TableNAT {
			continue
		}
		want := map[string]bool{}
		for _, c := range r.Table(table) {
			want[c.Name] = true
		}
		for _, n := range names {
			if Owned(n) && !want[n] {
				out[table] = append(out[table], n)
			}
		}
	}
	return out
}

// CleanupText is the iptables-restore input (for --noflush) that removes
// everything kubette's proxy owns from a host whose iptables-save output is
// saved: every rule of another chain that jumps to an owned chain (the hooks
// in the built-in chains), then every owned chain, flushed and deleted.
// It returns nil when nothing is owned.
func CleanupText(saved []byte) []byte {
	type table struct {
		jumps  []string
		chains []string
	}
	tables := map[string]*table{}
	var order []string
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(saved))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			cur = line[1:]
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if Owned(name) {
				if tables[cur] == nil {
					tables[cur] = &table{}
					order = append(order, cur)
				}
				tables[cur].chains = append(tables[cur].chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			if len(fields) < 2 || Owned(fields[1]) {
				continue // rules inside owned chains go with the chain
			}
			for i := 2; i+1 < len(fields); i++ {
				if (fields[i] == "-j" || fields[i] == "-g") && Owned(fields[i+1]) {
					if tables[cur] == nil {
						tables[cur] = &table{}
						order = append(order, cur)
					}
					tables[cur].jumps = append(tables[cur].jumps, "-D "+line[len("-A "):])
					break
				}
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, name := range order {
		t := tables[name]
		b.WriteString("*" + name + "\n")
		for _, c := range t.chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, j := range t.jumps {
			b.WriteString(j + "\n")
		}
		for _, c := range t.chains {
			b.WriteString("-X " + c + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// Hook is a rule in a built-in chain that jumps to one of kubette's chains.
type Hook struct {
	Table, Chain string
	Args         []string
}

// GuardHooks are the jumps to the guard chain, to be first in OUTPUT and
// FORWARD of the filter table.
func GuardHooks() []Hook {
	args := []string{"-m", "comment", "--comment", "kubette service CIDR guard", "-j", ChainGuard}
	return []Hook{
		{Table: TableFilter, Chain: "OUTPUT", Args: args},
		{Table: TableFilter, Chain: "FORWARD", Args: args},
	}
}

// Hooks are the jumps from the built-in chains to the service chains, as
// upstream's iptables proxier installs them.
func Hooks() []Hook {
	newConn := []string{"-m", "conntrack", "--ctstate", "NEW"}
	portals := []string{"-m", "comment", "--comment", "kubernetes service portals"}
	external := []string{"-m", "comment", "--comment", "kubernetes externally-visible service portals"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	return []Hook{
		{TableFilter, "INPUT", cat(newConn, external, []string{"-j", ChainExternalServices})},
		{TableFilter, "FORWARD", cat(newConn, portals, []string{"-j", ChainServices})},
		{TableFilter, "FORWARD", cat(newConn, external, []string{"-j", ChainExternalServices})},
		{TableFilter, "FORWARD", []string{"-m", "comment", "--comment", "kubernetes forwarding rules", "-j", ChainForward}},
		{TableFilter, "OUTPUT", cat(newConn, portals, []string{"-j", ChainServices})},
		{TableNAT, "PREROUTING", cat(portals, []string{"-j", ChainServices})},
		{TableNAT, "OUTPUT", cat(portals, []string{"-j", ChainServices})},
		{TableNAT, "POSTROUTING", []string{"-m", "comment", "--comment", "kubernetes postrouting rules", "-j", ChainPostrouting}},
	}
}
