package iptables

import (
	"bufio"
	"bytes"
	"cmp"
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
	writeTableEdits(b, table, chains, nil, deleted)
}

// writeTableEdits is writeTable with rule edits of chains that are not
// declared (declaring one would flush it), written after the rules of the
// declared chains (an insert may jump to one of them) and before the
// deletions (a delete may remove the last jump to a deleted chain).
func writeTableEdits(b *bytes.Buffer, table string, chains []Chain, edits []chainEdits, deleted []string) {
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
	for _, e := range edits {
		b.Write(appendEditLines(b.AvailableBuffer(), e.name, e.edits))
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
// rewritten (or, for a long fixed chain such as KUBE-SERVICES, edited rule by
// rule: see diffChains), the chains gone are flushed and deleted, unchanged chains are
// left alone (--noflush). It returns nil when nothing changed. Applying it to
// a host holding prev leaves exactly what next.Text would.
func Update(prev, next *Ruleset) []byte {
	bs := UpdateBatches(prev, next, 0)
	if len(bs) == 0 {
		return nil
	}
	return bytes.Join(bs, nil)
}

// UpdateBatches is Update split as TextBatches splits Text; nil when nothing
// changed.
func UpdateBatches(prev, next *Ruleset, maxChains int) [][]byte {
	var pl plan
	if prev.services == nil || next.services == nil {
		for _, t := range []string{TableFilter, TableNAT} {
			diffChains(&pl, t, prev.Table(t), next.Table(t))
		}
		return pl.batches(maxChains)
	}
	// Both come from a Renderer: the fixed chains are compared one by one, the
	// service chains only for the Services whose output is not the same.
	diffChains(&pl, TableFilter, prev.Filter, next.Filter)
	diffChains(&pl, TableNAT, prev.NAT[:len(prev.NAT)-serviceChains(prev)], next.NAT[:len(next.NAT)-serviceChains(next)])
	i, j := 0, 0
	for i < len(prev.services) || j < len(next.services) {
		var c int
		switch {
		case i == len(prev.services):
			c = 1
		case j == len(next.services):
			c = -1
		default:
			x, y := &prev.services[i].in, &next.services[j].in
			c = cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
		}
		switch {
		case c < 0: // gone
			for _, ch := range prev.services[i].chains {
				pl.del(TableNAT, ch.Name)
			}
			i++
		case c > 0: // new
			for _, ch := range next.services[j].chains {
				pl.add(TableNAT, ch)
			}
			j++
		default:
			if prev.services[i] != next.services[j] {
				diffChains(&pl, TableNAT, prev.services[i].chains, next.services[j].chains)
			}
			i++
			j++
		}
	}
	return pl.batches(maxChains)
}

func serviceChains(r *Ruleset) int {
	n := 0
	for _, s := range r.services {
		n += len(s.chains)
	}
	return n
}

// diffChains adds to pl the chains of next that are new or changed from
// prev, and deletes those of prev that next does not have. A changed fixed
// chain (KUBE-SERVICES, ...; not a per-service chain, which is small, nor
// KUBE-MARK-MASQ, which goes with the first restore) gets rule edits instead
// of a rewrite when ruleEdits finds them worth it: a Service's first or last
// ready endpoint moves one rule between the nat and the filter table's
// KUBE-SERVICES, which hold a rule per Service port.
func diffChains(pl *plan, table string, prev, next []Chain) {
	old := make(map[string][]string, len(prev))
	for _, c := range prev {
		old[c.Name] = c.Rules
	}
	for _, c := range next {
		rules, ok := old[c.Name]
		switch {
		case ok && slices.Equal(rules, c.Rules):
		case ok && !isServiceChain(c.Name) && c.Name != ChainMarkMasq:
			if edits, cheap := ruleEdits(rules, c.Rules); cheap {
				pl.edit(table, c.Name, edits)
			} else {
				pl.add(table, c)
			}
		default:
			pl.add(table, c)
		}
		delete(old, c.Name)
	}
	for _, c := range prev {
		if _, ok := old[c.Name]; ok {
			pl.del(table, c.Name)
		}
	}
}

// TextBatches is Text split into restores of at most about maxChains
// per-service chains each (one restore when maxChains <= 0 or when there
// are no more chains than that), because
// iptables-nft-restore --noflush takes time quadratic in the chains of one
// transaction. Every service port's chains (KUBE-SVC, KUBE-EXT and its
// KUBE-SEPs) stay in one restore; the restores come in an order where every
// jump has its target at each step: the per-service chains first (a port's KUBE-SVC, KUBE-SVL, KUBE-EXT and KUBE-SEPs together), then the
// fixed chains (KUBE-SERVICES, ...) and the filter table, then the deletion of
// stale chains in that same last restore.
func (r *Ruleset) TextBatches(stale map[string][]string, maxChains int) [][]byte {
	var pl plan
	for _, t := range []string{TableFilter, TableNAT} {
		for _, c := range r.Table(t) {
			pl.add(t, c)
		}
		for _, name := range stale[t] {
			pl.del(t, name)
		}
	}
	return pl.batches(maxChains)
}

// plan is a set of chains to write and to delete, per table.
type plan struct {
	// service holds the per-service chains of the nat table; fixed the other
	// chains per table; gone the chains to delete per table.
	service     []Chain
	fixed, gone map[string][]Chain
	// leaf holds KUBE-MARK-MASQ, which per-service chains jump to: it goes
	// with the first restore.
	leaf []Chain
	// edits holds rule edits of fixed chains per table: they go with the
	// fixed chains, in the last restore.
	edits map[string][]chainEdits
}

// chainEdits are the rule edits of one chain.
type chainEdits struct {
	name  string
	edits []RuleEdit
}

func (pl *plan) edit(table, name string, edits []RuleEdit) {
	if pl.edits == nil {
		pl.edits = map[string][]chainEdits{}
	}
	pl.edits[table] = append(pl.edits[table], chainEdits{name, edits})
}

func (pl *plan) add(table string, c Chain) {
	if table == TableNAT && isServiceChain(c.Name) {
		pl.service = append(pl.service, c)
		return
	}
	if table == TableNAT && c.Name == ChainMarkMasq {
		pl.leaf = append(pl.leaf, c)
		return
	}
	if pl.fixed == nil {
		pl.fixed = map[string][]Chain{}
	}
	pl.fixed[table] = append(pl.fixed[table], c)
}

func (pl *plan) del(table, name string) {
	if pl.gone == nil {
		pl.gone = map[string][]Chain{}
	}
	pl.gone[table] = append(pl.gone[table], Chain{Name: name})
}

func isServiceChain(name string) bool {
	return strings.HasPrefix(name, PrefixSVC) || strings.HasPrefix(name, PrefixSVL) || strings.HasPrefix(name, PrefixSEP) ||
		strings.HasPrefix(name, PrefixEXT) || strings.HasPrefix(name, PrefixFW)
}

// startsPort reports whether chains[i] is the first chain of a service port:
// its KUBE-SVC chain, or its KUBE-SVL chain when it has no KUBE-SVC chain
// (the renderer writes KUBE-SVC, KUBE-SVL, KUBE-EXT, then the KUBE-SEPs).
func startsPort(chains []Chain, i int) bool {
	name := chains[i].Name
	if strings.HasPrefix(name, PrefixSVC) {
		return true
	}
	if !strings.HasPrefix(name, PrefixSVL) {
		return false
	}
	return i == 0 || chains[i-1].Name != PrefixSVC+strings.TrimPrefix(name, PrefixSVL)
}

func (pl *plan) batches(maxChains int) [][]byte {
	if len(pl.service) <= maxChains {
		maxChains = 0 // small enough for one atomic restore
	}
	var out [][]byte
	var b bytes.Buffer
	// Per-service chains, cut only before a KUBE-SVC chain so that a service
	// port's chains go together.
	start := 0
	for i := 0; i <= len(pl.service); i++ {
		cut := i == len(pl.service) ||
			(maxChains > 0 && i-start >= maxChains && startsPort(pl.service, i))
		if !cut || i == start {
			continue
		}
		if maxChains > 0 || i < len(pl.service) {
			b.Reset()
			chains := pl.service[start:i]
			if len(out) == 0 {
				chains = append(slices.Clone(pl.leaf), chains...)
			}
			writeTable(&b, TableNAT, chains, nil)
			out = append(out, slices.Clone(b.Bytes()))
		}
		start = i
	}
	b.Reset()
	for _, t := range []string{TableFilter, TableNAT} {
		chains, gone, edits := pl.fixed[t], pl.gone[t], pl.edits[t]
		if t == TableNAT && len(out) == 0 {
			// One restore: everything goes together, in Text's order.
			chains = slices.Concat(chains, pl.leaf, pl.service)
		}
		if len(chains) == 0 && len(gone) == 0 && len(edits) == 0 {
			continue
		}
		names := make([]string, len(gone))
		for i, g := range gone {
			names[i] = g.Name
		}
		writeTableEdits(&b, t, chains, edits, names)
	}
	if b.Len() > 0 {
		out = append(out, slices.Clone(b.Bytes()))
	}
	return out
}

// Owned reports whether kubette's proxy owns a chain of this name.
func Owned(name string) bool {
	switch name {
	case ChainServices, ChainExternalServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq, ChainForward, ChainGuard, ChainProxyFirewall:
		return true
	}
	return isServiceChain(name)
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
	firewall := []string{"-m", "comment", "--comment", "kubernetes load balancer firewall"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	return []Hook{
		{TableFilter, "INPUT", []string{"-m", "comment", "--comment", "kubernetes health check service ports", "-j", ChainNodePorts}},
		{TableFilter, "INPUT", cat(newConn, external, []string{"-j", ChainExternalServices})},
		{TableFilter, "FORWARD", cat(newConn, portals, []string{"-j", ChainServices})},
		{TableFilter, "FORWARD", cat(newConn, external, []string{"-j", ChainExternalServices})},
		{TableFilter, "FORWARD", []string{"-m", "comment", "--comment", "kubernetes forwarding rules", "-j", ChainForward}},
		{TableFilter, "INPUT", cat(newConn, firewall, []string{"-j", ChainProxyFirewall})},
		{TableFilter, "OUTPUT", cat(newConn, firewall, []string{"-j", ChainProxyFirewall})},
		{TableFilter, "FORWARD", cat(newConn, firewall, []string{"-j", ChainProxyFirewall})},
		{TableFilter, "OUTPUT", cat(newConn, portals, []string{"-j", ChainServices})},
		{TableNAT, "PREROUTING", cat(portals, []string{"-j", ChainServices})},
		{TableNAT, "OUTPUT", cat(portals, []string{"-j", ChainServices})},
		{TableNAT, "POSTROUTING", []string{"-m", "comment", "--comment", "kubernetes postrouting rules", "-j", ChainPostrouting}},
	}
}
