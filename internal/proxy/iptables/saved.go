package iptables

import (
	"bytes"
	"fmt"
	"slices"
)

// Saved is iptables-save output parsed: per table, its chains in the order
// printed and each chain's rules (the text after "-A CHAIN "). The rules are
// substrings of one copy of the output.
type Saved struct {
	Tables map[string]*SavedTable
}

// SavedTable is one table of a Saved.
type SavedTable struct {
	// Chains are the chain names in the order of their declarations.
	Chains []string
	// Rules maps a chain name to its rules, in order. A declared chain
	// without rules maps to nil.
	Rules map[string][]string
}

// ParseSave parses iptables-save output. It reads the lines it knows
// ("*table", ":chain policy [counters]", "-A chain rule", "COMMIT",
// comments and blank lines) and fails on anything else, on a rule outside a
// table or for a chain not declared before, and on a chain declared twice.
func ParseSave(saved []byte) (*Saved, error) {
	text := string(saved) // one copy; rules are substrings of it
	out := &Saved{Tables: map[string]*SavedTable{}}
	var cur *SavedTable
	for n := 1; len(text) > 0; n++ {
		line := text
		if i := indexNewline(text); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		switch {
		case line == "" || line[0] == '#':
		case line[0] == '*':
			name := line[1:]
			if name == "" || cur != nil {
				return nil, fmt.Errorf("iptables-save line %d: table %q inside another table", n, name)
			}
			if cur = out.Tables[name]; cur == nil {
				cur = &SavedTable{Rules: map[string][]string{}}
				out.Tables[name] = cur
			}
		case line == "COMMIT":
			if cur == nil {
				return nil, fmt.Errorf("iptables-save line %d: COMMIT outside a table", n)
			}
			cur = nil
		case line[0] == ':':
			name, _, _ := cutSpace(line[1:])
			if cur == nil || name == "" {
				return nil, fmt.Errorf("iptables-save line %d: bad chain declaration %q", n, line)
			}
			if _, dup := cur.Rules[name]; dup {
				return nil, fmt.Errorf("iptables-save line %d: chain %s declared twice", n, name)
			}
			cur.Chains = append(cur.Chains, name)
			cur.Rules[name] = nil
		case len(line) > 3 && line[:3] == "-A ":
			chain, rule, _ := cutSpace(line[3:])
			if cur == nil {
				return nil, fmt.Errorf("iptables-save line %d: rule outside a table", n)
			}
			rules, ok := cur.Rules[chain]
			if !ok {
				return nil, fmt.Errorf("iptables-save line %d: rule of undeclared chain %q", n, chain)
			}
			cur.Rules[chain] = append(rules, rule)
		default:
			return nil, fmt.Errorf("iptables-save line %d: unexpected %q", n, line)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("iptables-save: table without COMMIT")
	}
	return out, nil
}

func indexNewline(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return i
		}
	}
	return -1
}

func cutSpace(s string) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Text prints s back in iptables-save's shape (chains without policies and
// counters: "-"), tables sorted by name. ParseSave of it gives s again.
func (s *Saved) Text() []byte {
	var b bytes.Buffer
	names := make([]string, 0, len(s.Tables))
	for n := range s.Tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t := s.Tables[n]
		b.WriteString("*" + n + "\n")
		for _, c := range t.Chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range t.Chains {
			for _, r := range t.Rules[c] {
				b.WriteString("-A " + c)
				if r != "" {
					b.WriteString(" " + r)
				}
				b.WriteString("\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// SyncStats say what FullSyncBatches found.
type SyncStats struct {
	// Unchanged counts the chains of the ruleset the host already holds
	// with the same rules; Changed those written (new or different); Stale
	// the owned chains deleted; Unpredicted the rules SaveForm could not
	// predict (their chains count as changed).
	Unchanged, Changed, Stale, Unpredicted int
}

// FullSyncBatches is the full sync of r against a host whose tables are
// saved: only the chains the host lacks or holds with other rules are
// written, the owned chains r lacks are deleted, in batches as TextBatches
// makes them; nil when the host already holds exactly r. Applied to that
// host it leaves what r.Text would. A rule is compared in its SaveForm; a
// rule without one makes its chain count as changed.
func (r *Ruleset) FullSyncBatches(saved *Saved, maxChains int) ([][]byte, SyncStats) {
	var pl plan
	var st SyncStats
	for _, tn := range []string{TableFilter, TableNAT} {
		var have *SavedTable
		if saved != nil {
			have = saved.Tables[tn]
		}
		want := map[string]bool{}
		compare := func(c Chain, forms []string, unpredicted int) {
			want[c.Name] = true
			st.Unpredicted += unpredicted
			if have != nil && unpredicted == 0 {
				if rules, ok := have.Rules[c.Name]; ok && slices.Equal(rules, forms) {
					st.Unchanged++
					return
				}
			}
			st.Changed++
			pl.add(tn, c)
		}
		if tn == TableNAT && r.services != nil {
			fixed := r.NAT[:len(r.NAT)-serviceChains(r)]
			for _, c := range fixed {
				forms, bad := saveForms(c.Rules)
				compare(c, forms, bad)
			}
			for _, s := range r.services {
				for i, c := range s.chains {
					forms, bad := s.saveForms(i)
					compare(c, forms, bad)
				}
			}
		} else {
			for _, c := range r.Table(tn) {
				forms, bad := saveForms(c.Rules)
				compare(c, forms, bad)
			}
		}
		if have != nil {
			for _, name := range have.Chains {
				if Owned(name) && !want[name] {
					st.Stale++
					pl.del(tn, name)
				}
			}
		}
	}
	return pl.batches(maxChains), st
}

// saveForms returns the SaveForm of each rule and how many had none.
func saveForms(rules []string) ([]string, int) {
	out := make([]string, len(rules))
	bad := 0
	for i, r := range rules {
		f, ok := SaveForm(r)
		if !ok {
			bad++
		}
		out[i] = f
	}
	return out, bad
}

// saveForms returns the SaveForms of the rules of chain i of the Service,
// computed once per rendered Service (a Renderer keeps the output of
// unchanged Services, and so their save forms).
func (s *svcOut) saveForms(i int) ([]string, int) {
	if s.forms == nil {
		s.forms = make([][]string, len(s.chains))
		s.unpredicted = make([]int, len(s.chains))
		for j, c := range s.chains {
			s.forms[j], s.unpredicted[j] = saveForms(c.Rules)
		}
	}
	return s.forms[i], s.unpredicted[i]
}

// HasRule reports whether the saved table's chain holds the rule given as
// iptables arguments (a hook's Args).
func (s *Saved) HasRule(table, chain string, args []string) bool {
	t := s.Tables[table]
	if t == nil {
		return false
	}
	form, ok := SaveForm(quoteRuleArgs(args))
	return ok && slices.Contains(t.Rules[chain], form)
}

// FirstRuleJumpsTo reports whether the first rule of the saved table's
// chain jumps to target.
func (s *Saved) FirstRuleJumpsTo(table, chain, target string) bool {
	t := s.Tables[table]
	if t == nil || len(t.Rules[chain]) == 0 {
		return false
	}
	toks, ok := splitRule(t.Rules[chain][0], nil)
	if !ok {
		return false
	}
	for i := 0; i+1 < len(toks); i++ {
		if toks[i] == "-j" && toks[i+1] == target {
			return true
		}
	}
	return false
}

// quoteRuleArgs joins iptables arguments into a rule's text, quoting the
// ones with spaces.
func quoteRuleArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "" || bytes.ContainsAny([]byte(a), " \t") {
			b.WriteString(`"` + a + `"`)
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}
