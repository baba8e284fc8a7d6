package nftables

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
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
		declareChain(&b, &rs.Chains[i], rs.suffix)
	}
	for i := range rs.Sets {
		declareSet(&b, &rs.Sets[i], rs.suffix)
	}
	for i := range rs.Chains {
		addRules(&b, &rs.Chains[i], rs.suffix)
	}
	for i := range rs.Sets {
		addElements(&b, named(rs.Sets[i].Name, rs.suffix), rs.Sets[i].Elements, false, rs.suffix)
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
	declareChain(&b, &guard, "")
	b.WriteString("flush chain " + prefix + guard.Name + "\n")
	addRules(&b, &guard, "")
	for i := range hooked {
		// A jump already there (a previous run's) stays: the chain is
		// declared, its rules flushed and written again in this one
		// transaction, so the guard is never missing.
		declareChain(&b, &hooked[i], "")
	}
	for i := range hooked {
		b.WriteString("flush chain " + prefix + hooked[i].Name + "\n")
		addRules(&b, &hooked[i], "")
	}
	return b.Bytes()
}

func declareChain(b *bytes.Buffer, c *Chain, sfx string) {
	b.WriteString("add chain " + prefix)
	b.WriteString(named(c.Name, sfx))
	if c.Hook != "" {
		b.WriteString(" { " + c.Hook + " ; }")
	}
	b.WriteByte('\n')
}

// isShared says whether name is one of the shared sets: a fixed one or an
// endpoint map.
func isShared(name string) bool {
	if slices.Contains(fixedSetNames, name) {
		return true
	}
	_, _, ok := parseEndpointMap(name)
	return ok
}

// named is the name a set or chain has in the kernel: a shared set and an
// endpoint map's chain carry the suffix of the generation a full sync wrote
// them in (see Applier), the others their own name.
func named(name, sfx string) string {
	if sfx != "" && isShared(name) {
		return name + sfx
	}
	return name
}

// namedVerdict is a verdict map value with its chain's name in the kernel
// (an endpoint map's chain carries its generation's suffix too).
func namedVerdict(v, sfx string) string {
	if sfx == "" {
		return v
	}
	if verb, chain, ok := strings.Cut(v, " "); ok && (verb == "goto" || verb == "jump") {
		return verb + " " + named(chain, sfx)
	}
	return v
}

// withSuffix rewrites a rule's references to shared sets (@name) to their
// names in generation sfx.
func withSuffix(rule, sfx string) string {
	if sfx == "" || !strings.Contains(rule, "@") {
		return rule
	}
	var b strings.Builder
	for {
		at := strings.IndexByte(rule, '@')
		if at < 0 {
			b.WriteString(rule)
			return b.String()
		}
		end := strings.IndexByte(rule[at:], ' ')
		if end < 0 {
			end = len(rule) - at
		}
		b.WriteString(rule[:at+1])
		b.WriteString(named(rule[at+1:at+end], sfx))
		rule = rule[at+end:]
	}
}

func declareSet(b *bytes.Buffer, s *Set, sfx string) {
	b.WriteString("add " + s.Kind + " " + prefix + named(s.Name, sfx) + " { " + s.Spec + " ; }\n")
}

func addRules(b *bytes.Buffer, c *Chain, sfx string) {
	for _, r := range c.Rules {
		b.WriteString("add rule " + prefix)
		b.WriteString(named(c.Name, sfx))
		b.WriteByte(' ')
		b.WriteString(withSuffix(r, sfx))
		b.WriteByte('\n')
	}
}

// addElements writes "add element" (or, keysOnly, "delete element")
// commands for els.
func addElements(b *bytes.Buffer, set string, els []Element, keysOnly bool, sfx string) {
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
				b.WriteString(namedVerdict(e.Value, sfx))
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
	if old.suffix != next.suffix {
		return nil, false
	}
	sfx := next.suffix
	if next.prev == old {
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
			declareChain(&b, c, sfx)
			fill = append(fill, c)
		case o.Hook != c.Hook:
			return nil, false
		case !slices.Equal(o.Rules, c.Rules):
			b.WriteString("flush chain " + prefix + named(c.Name, sfx) + "\n")
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
			declareSet(&b, s, sfx)
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
		addRules(&b, c, sfx)
	}
	for _, d := range dels {
		addElements(&b, named(d.set, sfx), d.els, true, sfx)
	}
	for _, a := range adds {
		addElements(&b, named(a.set, sfx), a.els, false, sfx)
	}
	for i := range old.Chains {
		if c := &old.Chains[i]; !newChains[c.Name] {
			b.WriteString("flush chain " + prefix + named(c.Name, sfx) + "\n")
		}
	}
	for i := range old.Chains {
		if c := &old.Chains[i]; !newChains[c.Name] {
			b.WriteString("delete chain " + prefix + named(c.Name, sfx) + "\n")
		}
	}
	for i := range old.Sets {
		if s := &old.Sets[i]; !newSets[s.Name] {
			b.WriteString("delete " + s.Kind + " " + prefix + named(s.Name, sfx) + "\n")
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
	sfx := next.suffix
	var fill, gone []*Chain
	var goneSets []*Set
	for i := range numFixedChains {
		o, c := &old.Chains[i], &next.Chains[i]
		if o.Name != c.Name || o.Hook != c.Hook {
			return nil, false
		}
		if !slices.Equal(o.Rules, c.Rules) {
			b.WriteString("flush chain " + prefix + named(c.Name, sfx) + "\n")
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
			declareSet(&b, &newMaps[i], sfx)
			c := &next.Chains[numFixedChains+i]
			declareChain(&b, c, sfx)
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
				declareChain(&b, c, sfx)
				fill = append(fill, c)
			case !slices.Equal(oldChains[j].Rules, c.Rules):
				b.WriteString("flush chain " + prefix + named(c.Name, sfx) + "\n")
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
				declareSet(&b, s, sfx)
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
		addRules(&b, c, sfx)
	}
	// Deletes first: a key that moves from one endpoint map to another, or
	// whose value changes, is never in two places.
	for i := range old.shared {
		if name := old.Sets[i].Name; !goneMap[name] {
			addElements(&b, named(name, sfx), next.delta[name].del, true, sfx)
		}
	}
	for i := range next.shared {
		name := next.Sets[i].Name
		addElements(&b, named(name, sfx), next.delta[name].add, false, sfx)
	}
	for _, c := range gone {
		b.WriteString("flush chain " + prefix + named(c.Name, sfx) + "\n")
	}
	for _, c := range gone {
		b.WriteString("delete chain " + prefix + named(c.Name, sfx) + "\n")
	}
	for _, s := range goneSets {
		b.WriteString("delete " + s.Kind + " " + prefix + named(s.Name, sfx) + "\n")
	}
	return b.Bytes(), true
}

// Listing is what a table holds, by name: chains, and sets and maps with
// their kind ("set" or "map").
type Listing struct {
	Chains []string
	Sets   map[string]string
	// InUse is the generation suffix of the service-ips map the services
	// chain looks up ("" for none or FullText's).
	InUse string
}

// LeftoverText is nft input that deletes what a failed full sync left of
// generation sfx in the table have (its chains' rules, which look up its
// sets, then the sets, whose verdicts refer to the chains, then the
// chains); nil when nothing is left. No rule refers to that
// generation while another one serves.
func LeftoverText(have Listing, sfx string) []byte {
	var b bytes.Buffer
	names := make([]string, 0, len(have.Sets))
	for name := range have.Sets {
		if strings.HasSuffix(name, sfx) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range have.Chains {
		if strings.HasSuffix(name, sfx) {
			b.WriteString("flush chain " + prefix + name + "\n")
		}
	}
	for _, name := range names {
		b.WriteString("delete " + have.Sets[name] + " " + prefix + name + "\n")
	}
	for _, name := range have.Chains {
		if strings.HasSuffix(name, sfx) {
			b.WriteString("delete chain " + prefix + name + "\n")
		}
	}
	return b.Bytes()
}

// PrepareText is the first step of a full sync through netlink (Applier):
// nft input that declares the table, every chain of rs (a new one empty),
// and generation rs.suffix of the shared sets and of the endpoint maps'
// chains with their rules (nft 1.0.6 accepts a rule that looks up an
// endpoint map only in the transaction that declares the map). Nothing
// refers to that generation yet, so no packet sees a change.
func PrepareText(rs *Ruleset) []byte {
	var b bytes.Buffer
	b.WriteString("add table " + prefix + "{ comment \"kubette service proxy\" ; }\n")
	for i := range rs.Chains {
		declareChain(&b, &rs.Chains[i], rs.suffix)
	}
	for i := range rs.shared {
		declareSet(&b, &rs.Sets[i], rs.suffix)
	}
	for i := numFixedChains; i < numFixedChains+rs.shared-len(fixedSetNames); i++ {
		addRules(&b, &rs.Chains[i], rs.suffix)
	}
	return b.Bytes()
}

// SwitchText is the last step of a full sync through netlink: nft input
// that, in one transaction, flushes every chain of have but the new
// generation's, declares the Services' own sets again (deleting any that
// was there: its declaration may have changed), adds the rules of the
// fixed and the Services' chains (referring to the shared sets of
// generation rs.suffix, filled by then), and deletes the chains and sets of
// have that rs does not have (the other generation among them; sets first:
// the verdict maps refer to the chains).
func SwitchText(rs *Ruleset, have Listing) []byte {
	var b bytes.Buffer
	sfx := rs.suffix
	chains := make(map[string]bool, len(rs.Chains))
	for i := range rs.Chains {
		chains[named(rs.Chains[i].Name, sfx)] = true
	}
	nEndpointChains := rs.shared - len(fixedSetNames)
	ownChain := func(i int) bool { return i < numFixedChains || i >= numFixedChains+nEndpointChains }
	for _, name := range have.Chains {
		if !chains[name] || !isShared(strings.TrimSuffix(name, sfx)) {
			b.WriteString("flush chain " + prefix + name + "\n")
		}
	}
	want := make(map[string]bool, len(rs.Sets))
	for i := range rs.Sets {
		s := &rs.Sets[i]
		want[named(s.Name, sfx)] = true
		if i < rs.shared {
			continue
		}
		if kind, ok := have.Sets[s.Name]; ok {
			b.WriteString("delete " + kind + " " + prefix + s.Name + "\n")
		}
		declareSet(&b, s, "")
	}
	for i := range rs.Chains {
		if ownChain(i) {
			declareChain(&b, &rs.Chains[i], sfx)
		}
	}
	for i := range rs.Chains {
		if ownChain(i) {
			addRules(&b, &rs.Chains[i], sfx)
		}
	}
	names := make([]string, 0, len(have.Sets))
	for name := range have.Sets {
		if !want[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		b.WriteString("delete " + have.Sets[name] + " " + prefix + name + "\n")
	}
	for _, name := range have.Chains {
		if !chains[name] {
			b.WriteString("delete chain " + prefix + name + "\n")
		}
	}
	return b.Bytes()
}
