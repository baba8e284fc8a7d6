package iptables

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// applyRuleEdits applies edits to rules as iptables-restore would, in a new
// slice; false when one would fail the restore (a delete that matches no
// rule, an insert past the end).
func applyRuleEdits(rules []string, edits []RuleEdit) ([]string, bool) {
	out := append([]string(nil), rules...)
	for _, e := range edits {
		if e.Insert {
			if e.Pos < 1 || e.Pos > len(out)+1 {
				return nil, false
			}
			out = append(out, "")
			copy(out[e.Pos:], out[e.Pos-1:])
			out[e.Pos-1] = e.Rule
			continue
		}
		found := false
		for i, r := range out {
			if r == e.Rule {
				out = append(out[:i], out[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return out, true
}

// TestRuleEditsProperty: for random rule lists (few distinct rules, so
// duplicates are common) and random changes of them, the edits ruleEdits
// returns turn prev into next when applied with iptables' semantics; it
// falls back only when the kept rules change order or the edits are many;
// and it never falls back for a rule added or removed in a long chain.
func TestRuleEditsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 4))
	used, reordered := 0, 0
	for n := range 20000 {
		alphabet := 2 + r.IntN(40)
		prev := make([]string, r.IntN(60))
		for i := range prev {
			prev[i] = fmt.Sprint("r", r.IntN(alphabet))
		}
		next := slices.Clone(prev)
		for range r.IntN(6) {
			switch r.IntN(4) {
			case 0, 1:
				i := r.IntN(len(next) + 1)
				next = slices.Insert(next, i, fmt.Sprint("r", r.IntN(alphabet+5)))
			case 2:
				if len(next) > 0 {
					i := r.IntN(len(next))
					next = slices.Delete(next, i, i+1)
				}
			case 3:
				if len(next) > 1 {
					i, j := r.IntN(len(next)), r.IntN(len(next))
					next[i], next[j] = next[j], next[i]
				}
			}
		}
		edits, ok := ruleEdits(prev, next)
		if !ok {
			if slices.Equal(prev, next) {
				continue
			}
			reordered++
			continue
		}
		used++
		got, applied := applyRuleEdits(prev, edits)
		if !applied || !slices.Equal(got, next) {
			t.Fatalf("case %d: prev %v next %v: edits %+v give %v (applied %v)", n, prev, next, edits, got, applied)
		}
		for k, e := range edits {
			if k > 0 && !e.Insert && edits[k-1].Insert {
				t.Fatalf("case %d: a delete after an insert: %+v", n, edits)
			}
		}
	}
	if used < 1000 || reordered < 100 {
		t.Fatalf("the cases do not cover both ways: %d with edits, %d rewrites", used, reordered)
	}

	// A long chain with one rule added or removed anywhere: always edits,
	// one each; the same with unique rules moved: a rewrite.
	long := make([]string, 10000)
	for i := range long {
		long[i] = fmt.Sprint("rule-", i)
	}
	for _, i := range []int{0, 1, 5000, 9999} {
		without := slices.Delete(slices.Clone(long), i, i+1)
		for _, c := range [][2][]string{{long, without}, {without, long}} {
			edits, ok := ruleEdits(c[0], c[1])
			if !ok || len(edits) != 1 {
				t.Fatalf("one rule at %d: %d edits, %v", i, len(edits), ok)
			}
			if got, _ := applyRuleEdits(c[0], edits); !slices.Equal(got, c[1]) {
				t.Fatalf("one rule at %d: wrong result", i)
			}
		}
	}
	swapped := slices.Clone(long)
	swapped[10], swapped[20] = swapped[20], swapped[10]
	if _, ok := ruleEdits(long, swapped); ok {
		t.Fatal("edits for rules that changed order")
	}
	// Many deletes deep down a long chain cost more than the rewrite.
	if _, ok := ruleEdits(long, long[:len(long)-2000]); ok {
		t.Fatal("edits for 2000 deletes at the end of 10000 rules")
	}
	// A short chain emptied: a rewrite (a flush) is cheaper.
	if _, ok := ruleEdits([]string{"a"}, nil); ok {
		t.Fatal("edits to empty a one-rule chain")
	}
}

// TestRuleEditsDuplicates: a delete by specification removes the first
// equal rule, so the first surplus copy is the one deleted.
func TestRuleEditsDuplicates(t *testing.T) {
	prev := []string{"a", "b", "a", "c"}
	next := []string{"b", "a", "c"}
	edits, ok := ruleEdits(prev, next)
	if !ok || len(edits) != 1 || edits[0] != (RuleEdit{Rule: "a"}) {
		t.Fatalf("edits %+v (%v), want one delete of a", edits, ok)
	}
	if got, _ := applyRuleEdits(prev, edits); !slices.Equal(got, next) {
		t.Fatalf("edits %+v give %v", edits, got)
	}
}

// TestUpdateWritesRuleEditsForFirstAndLastEndpoint: a Service of many
// gaining its first ready endpoint, and losing it again, is written as rule
// edits of both KUBE-SERVICES chains (neither is declared, which would flush
// it) plus its own chains; the update applied to prev equals next's full
// text, and a full sync's text is unchanged.
func TestUpdateWritesRuleEditsForFirstAndLastEndpoint(t *testing.T) {
	m := SyntheticModel(300, 3)
	for i := range 100 { // 100 REJECT rules in filter KUBE-SERVICES
		m.Services[i].Ports[0].Endpoints = nil
	}
	r := NewRenderer()
	withEndpoints := r.Render(m, testOptions)
	eps := m.Services[150].Ports[0].Endpoints
	m.Services[150].Ports[0].Endpoints = nil
	without := r.Render(m, testOptions)
	m.Services[150].Ports[0].Endpoints = eps
	again := r.Render(m, testOptions)
	const (
		jump   = `-m comment --comment "bench/svc-00150:http cluster IP" -m tcp -p tcp -d 10.96.0.150 --dport 80 -j KUBE-SVC-`
		reject = `-m comment --comment "bench/svc-00150:http has no endpoints" -m tcp -p tcp -d 10.96.0.150 --dport 80 -j REJECT`
	)
	for _, step := range []struct {
		name       string
		prev, next *Ruleset
		want       []string // prefixes of the edit lines, filter's then nat's
	}{
		{"last endpoint gone", withEndpoints, without, []string{"-I KUBE-SERVICES 101 " + reject, "-D KUBE-SERVICES " + jump}},
		{"first endpoint ready", without, again, []string{"-D KUBE-SERVICES " + reject, "-I KUBE-SERVICES 51 " + jump}},
	} {
		for _, maxChains := range []int{0, 100} {
			batches := UpdateBatches(step.prev, step.next, maxChains)
			text := string(bytes.Join(batches, nil))
			if strings.Contains(text, ":KUBE-SERVICES ") {
				t.Errorf("%s: KUBE-SERVICES declared (rewritten):\n%s", step.name, text)
			}
			var edits []string
			for _, l := range strings.Split(text, "\n") {
				if strings.HasPrefix(l, "-D ") || strings.HasPrefix(l, "-I ") {
					edits = append(edits, l)
				}
			}
			ok := len(edits) == len(step.want)
			for i := 0; ok && i < len(edits); i++ {
				ok = strings.HasPrefix(edits[i], step.want[i])
			}
			if !ok {
				t.Errorf("%s: edits\n%s\nwant (prefixes)\n%s", step.name, strings.Join(edits, "\n"), strings.Join(step.want, "\n"))
			}
			host, err := parseRestore(step.prev.Text(nil))
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range batches {
				if err := applyNoflush(host, b); err != nil {
					t.Fatalf("%s: batch %d: %v", step.name, i, err)
				}
			}
			want, _ := parseRestore(step.next.Text(nil))
			if d := diffTables(host, want); d != "" {
				t.Fatalf("%s: %s", step.name, d)
			}
		}
	}
	if !bytes.Equal(again.Text(nil), withEndpoints.Text(nil)) {
		t.Fatal("the same model renders another full text")
	}
}
