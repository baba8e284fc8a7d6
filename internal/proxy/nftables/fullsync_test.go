package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
)

// simRunner is an ElementWriter over the simulated table: nft input is
// applied to it, elements are written into it as netlink would.
type simRunner struct {
	t       *testing.T
	tb      *table
	failNow bool // the next WriteElements fails
}

func (r *simRunner) Nft(_ context.Context, stdin []byte, args ...string) ([]byte, error) {
	if !slices.Equal(args, []string{"-f", "-"}) {
		return nil, errors.New("simRunner: only nft -f -")
	}
	r.tb.apply(r.t, stdin)
	return nil, nil
}

func (r *simRunner) CanWriteElements() bool { return true }

func (r *simRunner) ListTable(context.Context) (Listing, error) {
	l := Listing{Sets: map[string]string{}}
	for name := range r.tb.chains {
		l.Chains = append(l.Chains, name)
	}
	slices.Sort(l.Chains)
	for name, spec := range r.tb.specs {
		l.Sets[name], _, _ = strings.Cut(spec, " ")
	}
	for _, rule := range r.tb.chains[ChainServices] {
		if _, after, ok := strings.Cut(rule, "vmap @"+MapServiceIPs); ok {
			l.InUse = after
		}
	}
	return l, nil
}

func (r *simRunner) WriteElements(_ context.Context, sfx string, sets []Set) error {
	if r.failNow {
		r.failNow = false
		return errors.New("injected failure")
	}
	for _, s := range sets {
		if !isShared(s.Name) {
			continue
		}
		name := named(s.Name, sfx)
		mustHave(r.t, r.tb.sets, name, "WriteElements")
		for _, e := range s.Elements {
			r.tb.sets[name][e.Key] = namedVerdict(e.Value, sfx)
		}
	}
	return nil
}

// TestFullSyncThroughNetlink runs random model sequences through an
// Applier over the simulated table, with full syncs (through a new
// generation of the shared sets) between partial ones and a failed
// element write now and then: after each successful sync the table holds
// exactly what FullText builds for that generation, and a full sync never
// deletes a chain or set something still refers to (the simulated table
// checks it).
func TestFullSyncThroughNetlink(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 13))
		var tb table
		tb.apply(t, []byte("init table"))
		run := &simRunner{t: t, tb: &tb}
		if seed%3 == 0 {
			// A table FullText wrote (an older proxy, or a Runner without
			// netlink), with its plain names.
			tb.apply(t, FullText(Render(randomModel(r), testOptions)))
		}
		a := NewApplier(run)
		gens := map[string]bool{}
		for step := range 8 {
			m := randomModel(r)
			full := step == 0 || r.IntN(3) == 0 || a.applied == nil
			inject := full && r.IntN(5) == 0
			run.failNow = inject
			_, err := a.Sync(context.Background(), m, testOptions, full)
			if inject {
				if err == nil {
					t.Fatalf("seed %d step %d: the injected failure was not reported", seed, step)
				}
				continue
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			rs := a.applied
			gens[rs.suffix] = true
			var want table
			want.apply(t, FullText(rs))
			if tb.String() != want.String() {
				t.Fatalf("seed %d step %d (full %v, generation %q): the table differs:\n%s\nwant:\n%s", seed, step, full, rs.suffix, tb.String(), want.String())
			}
		}
		if len(gens) == 0 {
			t.Fatalf("seed %d: no sync succeeded", seed)
		}
	}
}

func TestSyncFailureIsReported(t *testing.T) {
	var tb table
	tb.apply(t, []byte("init table"))
	run := &simRunner{t: t, tb: &tb, failNow: true}
	a := NewApplier(run)
	m := goldenCases()["nodeport"]
	if _, err := a.Sync(context.Background(), m, testOptions, true); err == nil || a.applied != nil {
		t.Fatalf("Sync with a failing element write: %v, applied %v", err, a.applied != nil)
	}
	// The next one deletes the leftovers of the failed generation and
	// writes it again.
	if _, err := a.Sync(context.Background(), m, testOptions, false); err != nil {
		t.Fatal(err)
	}
	var want table
	want.apply(t, FullText(a.applied))
	if tb.String() != want.String() {
		t.Fatalf("after the retry the table differs:\n%s\nwant:\n%s", tb.String(), want.String())
	}
}

func TestGenerationsAlternate(t *testing.T) {
	var tb table
	tb.apply(t, []byte("init table"))
	a := NewApplier(&simRunner{t: t, tb: &tb})
	m := goldenCases()["clusterip-3"]
	var got []string
	for range 3 {
		if _, err := a.Sync(context.Background(), m, testOptions, true); err != nil {
			t.Fatal(err)
		}
		got = append(got, a.applied.suffix)
	}
	if want := []string{suffixA, suffixB, suffixA}; !slices.Equal(got, want) {
		t.Errorf("generations %v, want %v", got, want)
	}
	if c := tb.chains[ChainServices]; !slices.Contains(c, "ip daddr . meta l4proto . th dport vmap @service-ips__a") {
		t.Errorf("services chain %v does not look up generation __a", c)
	}
	if _, ok := tb.sets["endpoints-3__b"]; ok {
		t.Error("generation __b is still there")
	}
}

func TestNamesInGeneration(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ip daddr . meta l4proto . th dport vmap @service-ips", "ip daddr . meta l4proto . th dport vmap @service-ips__b"},
		{"ct status dnat ip saddr . ip daddr @hairpin masquerade fully-random", "ct status dnat ip saddr . ip daddr @hairpin__b masquerade fully-random"},
		{"meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @endpoints-2", "meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @endpoints-2__b"},
		{"ip saddr @affinity-X-a/b/tcp/p__10.0.0.1/80 update @affinity-X-a/b/tcp/p__10.0.0.1/80 { ip saddr } meta l4proto tcp dnat to 10.0.0.1:80", "ip saddr @affinity-X-a/b/tcp/p__10.0.0.1/80 update @affinity-X-a/b/tcp/p__10.0.0.1/80 { ip saddr } meta l4proto tcp dnat to 10.0.0.1:80"},
	} {
		if got := withSuffix(c.in, "__b"); got != c.want {
			t.Errorf("withSuffix(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := namedVerdict("goto endpoints-3", "__a"); got != "goto endpoints-3__a" {
		t.Errorf("namedVerdict = %q", got)
	}
	if got := namedVerdict("goto service-ABC-default/web/tcp/http", "__a"); got != "goto service-ABC-default/web/tcp/http" {
		t.Errorf("namedVerdict of a Service's chain = %q", got)
	}
	if got := named("services", "__a"); got != "services" {
		t.Errorf("named(services) = %q", got)
	}
}

func TestEncodeElements(t *testing.T) {
	l, err := elementLayout("endpoints-10")
	if err != nil {
		t.Fatal(err)
	}
	els, err := encodeElements(l, []Element{{Key: "10.96.0.10 . udp . 53 . 7", Value: "10.244.1.2 . 5353"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]byte, 4)
	binary.NativeEndian.PutUint32(idx, 7)
	wantKey := append([]byte{10, 96, 0, 10, 17, 0, 0, 0, 0, 53, 0, 0}, idx...)
	if !slices.Equal(els[0].Key, wantKey) || !slices.Equal(els[0].Val, []byte{10, 244, 1, 2, 0x14, 0xe9, 0, 0}) {
		t.Errorf("endpoint map element: key %v value %v, want %v and %v", els[0].Key, els[0].Val, wantKey, []byte{10, 244, 1, 2, 0x14, 0xe9, 0, 0})
	}
	l, _ = elementLayout("nodeport-endpoints-2")
	if els, err = encodeElements(l, []Element{{Key: "tcp . 30080 . 1", Value: "10.244.1.2 . 80"}}, ""); err != nil || len(els[0].Key) != 12 || els[0].Key[0] != 6 {
		t.Errorf("nodeport endpoint element: %v, %v", els, err)
	}
	l, _ = elementLayout(MapServiceIPs)
	els, err = encodeElements(l, []Element{{Key: "10.96.0.10 . tcp . 80", Value: "goto endpoints-3"}, {Key: "10.96.0.11 . tcp . 80", Value: "drop"}}, "__b")
	if err != nil {
		t.Fatal(err)
	}
	if v := els[0].VerdictData; v == nil || v.Kind != expr.VerdictGoto || v.Chain != "endpoints-3__b" {
		t.Errorf("verdict %+v, want goto endpoints-3__b", v)
	}
	if v := els[1].VerdictData; v == nil || v.Kind != expr.VerdictDrop {
		t.Errorf("verdict %+v, want drop", v)
	}
	l, _ = elementLayout(SetHairpin)
	if els, err = encodeElements(l, []Element{{Key: "10.244.1.2 . 10.244.1.2"}}, ""); err != nil || !slices.Equal(els[0].Key, []byte{10, 244, 1, 2, 10, 244, 1, 2}) || els[0].Val != nil {
		t.Errorf("hairpin element: %v, %v", els, err)
	}
	for _, bad := range []string{"10.96.0.10 . tcp", "10.96.0.300 . tcp . 80 . 1", "10.96.0.10 . xyz . 80 . 1", "10.96.0.10 . tcp . 70000 . 1"} {
		l, _ = elementLayout("endpoints-2")
		if _, err := encodeElements(l, []Element{{Key: bad, Value: "10.244.1.2 . 80"}}, ""); err == nil {
			t.Errorf("key %q encoded", bad)
		}
	}
	if _, err := elementLayout("service-ABC-default/web/tcp/http"); err == nil {
		t.Error("a Service's chain name has an element layout")
	}
}
