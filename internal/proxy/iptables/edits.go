package iptables

import "strconv"

// RuleEdit is one rule-level change of a chain in an iptables-restore
// --noflush input: a delete by rule specification ("-D CHAIN rule", which
// removes the first rule of the chain that matches and fails the restore
// when none does) or an insert at a 1-based position ("-I CHAIN N rule",
// which fails the restore when the chain has fewer than N-1 rules).
type RuleEdit struct {
	// Insert is true for "-I", false for "-D".
	Insert bool
	// Pos is the insert's 1-based position; unused for a delete.
	Pos int
	// Rule is the rule as rendered (the text after "-A CHAIN ").
	Rule string
}

// The costs ruleEdits weighs, in units of one rule visited by a "-D CHAIN
// rule" (iptables-nft-restore 1.8.9 fetches the chain from the kernel, then
// converts and compares its rules one by one from the top until one
// matches: ~2.2 µs of CPU per rule passed on this machine). Measured in a
// namespace with 10000 Services × 10 endpoints and the jumps from the
// built-in chains (bench/proxy's README, session 7, load ~8): rewriting the
// nat KUBE-SERVICES chain of 10001 rules with itself cost ~1.4 s of CPU
// beyond the commit's fixed ~0.25 s, ~70 µs (32 units) per rule flushed or
// written; 200 deletes by position plus 200 inserts ~0.15 s (~64 units per
// edit, parsing and building one rule); fetching the chain ~3 µs per rule.
const (
	costRewritePerRule = 32
	costPerEdit        = 64
	costFetchPerRule   = 1
)

// ruleEdits returns the edits that turn the rules prev of a chain into next,
// keeping the rules both have where they are: first the deletes of the rules
// next does not have (in prev's order), then the inserts of the rules prev
// does not have (in next's order, each at the position it takes in next, so
// each position is right when the insert is applied). It reports false when
// the chain should be rewritten instead: the kept rules are not in the same
// order in both, or the edits would cost more than half of a rewrite (see
// the costs above: a delete pays for every rule above it, as iptables
// scans; a rewrite for every rule flushed and written). Applying the edits
// in order with iptables' semantics (a delete removes the first equal rule)
// to prev yields next exactly.
//
// Rules are compared as text: two rules of different text that iptables
// takes for the same rule are never both rendered into one chain.
func ruleEdits(prev, next []string) ([]RuleEdit, bool) {
	surplus := make(map[string]int, len(prev))
	for _, r := range prev {
		surplus[r]++
	}
	for _, r := range next {
		surplus[r]--
	}
	// The deletes: a delete by specification removes the first equal rule
	// left, so the first surplus copies of a rule are the ones that go.
	var edits []RuleEdit
	kept := make([]string, 0, len(prev))
	cost := costFetchPerRule * len(prev)
	for i, r := range prev {
		if surplus[r] > 0 {
			surplus[r]--
			cost += i - len(edits) + 1 // its position when deleted: the rules above it, deletes done
			edits = append(edits, RuleEdit{Rule: r})
			continue
		}
		kept = append(kept, r)
	}
	// The inserts: walk next; a rule that is not the next kept one goes in
	// at its position in next (the chain holds next[:i] above it by then).
	j := 0
	for i, r := range next {
		if j < len(kept) && kept[j] == r {
			j++
			continue
		}
		edits = append(edits, RuleEdit{Insert: true, Pos: i + 1, Rule: r})
	}
	if j < len(kept) {
		return nil, false // the kept rules are in another order
	}
	cost += costPerEdit * len(edits)
	if 2*cost > costRewritePerRule*(len(prev)+len(next)) {
		return nil, false
	}
	return edits, true
}

// appendEditLines appends the restore lines of edits to chain.
func appendEditLines(b []byte, chain string, edits []RuleEdit) []byte {
	for _, e := range edits {
		if e.Insert {
			b = append(b, "-I "...)
			b = append(b, chain...)
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(e.Pos), 10)
		} else {
			b = append(b, "-D "...)
			b = append(b, chain...)
		}
		b = append(b, ' ')
		b = append(b, e.Rule...)
		b = append(b, '\n')
	}
	return b
}
