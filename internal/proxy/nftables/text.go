package nftables

import (
	"bytes"
	"slices"
	"strconv"
)

// elementsPerCommand bounds the elements of one "add element" command (nft
// builds one netlink message per command).
const elementsPerCommand = 1000

const prefix = "ip " + Table + " "

// FullText is nft input that replaces the whole table with rs in one
// transaction: the table is created (so that deleting it cannot fail),
// deleted and declared again, then every chain and set is declared, every
// rule added, every element added. Packets see the old table or the new
// one, never a mix, and established connections keep their NAT bindings
// (they live in conntrack).
func FullText(rs *Ruleset) []byte {
	var b bytes.Buffer
	b.Grow(64 << 10)
	b.WriteString("add table " + prefix[:len(prefix)-1] + "\n")
	b.WriteString("delete table " + prefix[:len(prefix)-1] + "\n")
	b.WriteString("add table " + prefix + "{ comment \"kubette service proxy\" ; }\n")
	for i := range rs.Chains {
		declareChain(&b, &rs.Chains[i])
	}
	for i := range rs.Sets {
		declareSet(&b, &rs.Sets[i])
	}
	for i := range rs.Chains {
		addRules(&b, &rs.Chains[i])
	}
	for i := range rs.Sets {
		addElements(&b, rs.Sets[i].Name, rs.Sets[i].Elements, false)
	}
	return b.Bytes()
}

// GuardText is nft input that installs the guard without touching the rest
// of an existing table: the table, the guard chain, its rules and the jumps
// from filter-forward and filter-output (whose other rules are replaced by
// the first full sync anyway). For a proxy's start, before its first sync:
// a previous run's rules keep serving meanwhile.
func GuardText(guard Chain) []byte {
	var b bytes.Buffer
	b.WriteString("add table " + prefix + "{ comment \"kubette service proxy\" ; }\n")
	hooked := []Chain{
		{Name: "filter-forward", Hook: "type filter hook forward priority -90", Rules: []string{"jump " + ChainGuard}},
		{Name: "filter-output", Hook: "type filter hook output priority -90", Rules: []string{"jump " + ChainGuard}},
	}
	declareChain(&b, &guard)
	b.WriteString("flush chain " + prefix + guard.Name + "\n")
	addRules(&b, &guard)
	for i := range hooked {
		// A jump already there (a previous run's) stays: the chain is
		// declared, its rules flushed and written again in this one
		// transaction, so the guard is never missing.
		declareChain(&b, &hooked[i])
	}
	for i := range hooked {
		b.WriteString("flush chain " + prefix + hooked[i].Name + "\n")
		addRules(&b, &hooked[i])
	}
	return b.Bytes()
}

func declareChain(b *bytes.Buffer, c *Chain) {
	b.WriteString("add chain " + prefix)
	b.WriteString(c.Name)
	if c.Hook != "" {
		b.WriteString(" { " + c.Hook + " ; }")
	}
	b.WriteByte('\n')
}

func declareSet(b *bytes.Buffer, s *Set) {
	b.WriteString("add " + s.Kind + " " + prefix + s.Name + " { " + s.Spec + " ; }\n")
}

func addRules(b *bytes.Buffer, c *Chain) {
	for _, r := range c.Rules {
		b.WriteString("add rule " + prefix)
		b.WriteString(c.Name)
		b.WriteByte(' ')
		b.WriteString(r)
		b.WriteByte('\n')
	}
}

// addElements writes "add element" (or, keysOnly, "delete element")
// commands for els.
func addElements(b *bytes.Buffer, set string, els []Element, keysOnly bool) {
	verb := "add"
	if keysOnly {
		verb = "delete"
	}
	for i := 0; i < len(els); i += elementsPerCommand {
		b.WriteString(verb + " element " + prefix + set + " { ")
		for j, e := range els[i:min(i+elementsPerCommand, len(els))] {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.Key)
			if e.Value != "" && !keysOnly {
				b.WriteString(" : ")
				b.WriteString(e.Value)
			}
		}
		b.WriteString(" }\n")
	}
}

// UpdateText is nft input that turns the table holding old into one holding
// next in one transaction, writing only what differs: new chains and sets
// are declared, chains whose rules changed are flushed and filled again,
// map and set elements that went away are deleted and new or changed ones
// added, then chains and sets that went away are flushed and deleted (after
// every reference to them is gone). A base chain whose declaration changed
// cannot be changed in place: changed is false then and the caller writes
// FullText instead. An empty result (and changed true) means nothing
// differs.
func UpdateText(old, next *Ruleset) (text []byte, ok bool) {
	if old != nil && next.prev == old {
		return updateFromPrev(old, next)
	}
	var b bytes.Buffer
	oldChains := make(map[string]*Chain, len(old.Chains))
	for i := range old.Chains {
		oldChains[old.Chains[i].Name] = &old.Chains[i]
	}
	oldSets := make(map[string]*Set, len(old.Sets))
	for i := range old.Sets {
		oldSets[old.Sets[i].Name] = &old.Sets[i]
	}
	newChains := make(map[string]bool, len(next.Chains))
	var fill []*Chain
	for i := range next.Chains {
		c := &next.Chains[i]
		newChains[c.Name] = true
		o, found := oldChains[c.Name]
		switch {
		case !found:
			declareChain(&b, c)
			fill = append(fill, c)
		case o.Hook != c.Hook:
			return nil, false
		case !slices.Equal(o.Rules, c.Rules):
			b.WriteString("flush chain " + prefix + c.Name + "\n")
			fill = append(fill, c)
		}
	}
	newSets := make(map[string]bool, len(next.Sets))
	var adds, dels []struct {
		set string
		els []Element
	}
	for i := range next.Sets {
		s := &next.Sets[i]
		newSets[s.Name] = true
		o, found := oldSets[s.Name]
		if found && (o.Kind != s.Kind || o.Spec != s.Spec) {
			return nil, false
		}
		if !found {
			declareSet(&b, s)
			if len(s.Elements) > 0 {
				adds = append(adds, struct {
					set string
					els []Element
				}{s.Name, s.Elements})
			}
			continue
		}
		del, add := diffElements(o.Elements, s.Elements)
		if len(del) > 0 {
			dels = append(dels, struct {
				set string
				els []Element
			}{s.Name, del})
		}
		if len(add) > 0 {
			adds = append(adds, struct {
				set string
				els []Element
			}{s.Name, add})
		}
	}
	for _, c := range fill {
		addRules(&b, c)
	}
	for _, d := range dels {
		addElements(&b, d.set, d.els, true)
	}
	for _, a := range adds {
		addElements(&b, a.set, a.els, false)
	}
	for i := range old.Chains {
		if c := &old.Chains[i]; !newChains[c.Name] {
			b.WriteString("flush chain " + prefix + c.Name + "\n")
		}
	}
	for i := range old.Chains {
		if c := &old.Chains[i]; !newChains[c.Name] {
			b.WriteString("delete chain " + prefix + c.Name + "\n")
		}
	}
	for i := range old.Sets {
		if s := &old.Sets[i]; !newSets[s.Name] {
			b.WriteString("delete " + s.Kind + " " + prefix + s.Name + "\n")
		}
	}
	return b.Bytes(), true
}

// diffElements returns the elements of old whose key is gone or whose value
// changed (to delete) and those of next that are new or changed (to add);
// both lists are sorted by key.
func diffElements(old, next []Element) (del, add []Element) {
	i, j := 0, 0
	for i < len(old) || j < len(next) {
		switch {
		case j == len(next) || (i < len(old) && old[i].Key < next[j].Key):
			del = append(del, old[i])
			i++
		case i == len(old) || next[j].Key < old[i].Key:
			add = append(add, next[j])
			j++
		default:
			if old[i].Value != next[j].Value {
				del = append(del, old[i])
				add = append(add, next[j])
			}
			i++
			j++
		}
	}
	return del, add
}

// Summary counts a ruleset's objects, for logs and benchmarks.
func (rs *Ruleset) Summary() string {
	rules, elems := 0, 0
	for _, c := range rs.Chains {
		rules += len(c.Rules)
	}
	for _, s := range rs.Sets {
		elems += len(s.Elements)
	}
	return strconv.Itoa(len(rs.Chains)) + " chains, " + strconv.Itoa(rules) + " rules, " +
		strconv.Itoa(len(rs.Sets)) + " sets and maps, " + strconv.Itoa(elems) + " elements"
}

// numFixedChains is the length of fixedChains' result.
const numFixedChains = 12

// updateFromPrev is UpdateText for next derived from old by the Renderer:
// only the fixed chains, the changed Services' chains and sets and the
// fixed sets' delta are looked at.
func updateFromPrev(old, next *Ruleset) ([]byte, bool) {
	var b bytes.Buffer
	var fill, gone []*Chain
	var goneSets []*Set
	for i := range numFixedChains {
		o, c := &old.Chains[i], &next.Chains[i]
		if o.Name != c.Name || o.Hook != c.Hook {
			return nil, false
		}
		if !slices.Equal(o.Rules, c.Rules) {
			b.WriteString("flush chain " + prefix + c.Name + "\n")
			fill = append(fill, c)
		}
	}
	// The endpoint maps in use and their chains (the same index in the
	// maps after the fixed sets and the chains after the fixed chains).
	nFixed := len(fixedSetNames)
	oldMaps, newMaps := old.Sets[nFixed:old.shared], next.Sets[nFixed:next.shared]
	goneMap := map[string]bool{}
	for i := range newMaps {
		if !slices.ContainsFunc(oldMaps, func(s Set) bool { return s.Name == newMaps[i].Name }) {
			declareSet(&b, &newMaps[i])
			c := &next.Chains[numFixedChains+i]
			declareChain(&b, c)
			fill = append(fill, c)
		}
	}
	for i := range oldMaps {
		if !slices.ContainsFunc(newMaps, func(s Set) bool { return s.Name == oldMaps[i].Name }) {
			goneMap[oldMaps[i].Name] = true
			gone = append(gone, &old.Chains[numFixedChains+i])
			goneSets = append(goneSets, &oldMaps[i])
		}
	}
	for _, ch := range next.changes {
		var oldChains []Chain
		var oldSets []Set
		if ch.old != nil {
			oldChains, oldSets = ch.old.chains, ch.old.sets
		}
		var newChains []Chain
		var newSets []Set
		if ch.new != nil {
			newChains, newSets = ch.new.chains, ch.new.sets
		}
		for i := range newChains {
			c := &newChains[i]
			j := slices.IndexFunc(oldChains, func(o Chain) bool { return o.Name == c.Name })
			switch {
			case j < 0:
				declareChain(&b, c)
				fill = append(fill, c)
			case !slices.Equal(oldChains[j].Rules, c.Rules):
				b.WriteString("flush chain " + prefix + c.Name + "\n")
				fill = append(fill, c)
			}
		}
		for i := range oldChains {
			if !slices.ContainsFunc(newChains, func(c Chain) bool { return c.Name == oldChains[i].Name }) {
				gone = append(gone, &oldChains[i])
			}
		}
		for i := range newSets {
			s := &newSets[i]
			j := slices.IndexFunc(oldSets, func(o Set) bool { return o.Name == s.Name })
			if j < 0 {
				declareSet(&b, s)
			} else if oldSets[j].Spec != s.Spec || oldSets[j].Kind != s.Kind {
				return nil, false
			}
		}
		for i := range oldSets {
			if !slices.ContainsFunc(newSets, func(s Set) bool { return s.Name == oldSets[i].Name }) {
				goneSets = append(goneSets, &oldSets[i])
			}
		}
	}
	for _, c := range fill {
		addRules(&b, c)
	}
	// Deletes first: a key that moves from one endpoint map to another, or
	// whose value changes, is never in two places.
	for i := range old.shared {
		if name := old.Sets[i].Name; !goneMap[name] {
			addElements(&b, name, next.delta[name].del, true)
		}
	}
	for i := range next.shared {
		name := next.Sets[i].Name
		addElements(&b, name, next.delta[name].add, false)
	}
	for _, c := range gone {
		b.WriteString("flush chain " + prefix + c.Name + "\n")
	}
	for _, c := range gone {
		b.WriteString("delete chain " + prefix + c.Name + "\n")
	}
	for _, s := range goneSets {
		b.WriteString("delete " + s.Kind + " " + prefix + s.Name + "\n")
	}
	return b.Bytes(), true
}
