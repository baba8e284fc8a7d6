package iptables

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/testenv/needs"
)

// rootNetns creates a network namespace for t, deleted when t ends, and
// returns it with a runner of commands inside it.
func rootNetns(t *testing.T, name string) (string, func(stdin []byte, args ...string) ([]byte, error)) {
	t.Helper()
	needs.Root(t)
	needs.Binary(t, "ip", "iproute2")
	needs.Binary(t, "iptables-restore", "iptables")
	needs.Binary(t, "iptables-save", "iptables")
	ns := fmt.Sprintf("kbt-%s-%d", name, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	return ns, func(stdin []byte, args ...string) ([]byte, error) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
}

// TestRuleEditsWithIptables applies a ruleset with the real
// iptables-restore in a namespace of its own (with the jumps from the
// built-in chains), then a series of partial updates — Services losing
// their last and gaining their first ready endpoint, several at once,
// endpoints replaced, Services gone and new, a Local policy's guard rule —
// in batches as the proxy applies them, and after each compares every rule
// of the host (iptables-save, in SaveForm) with the next ruleset's full
// text: a full sync over it writes nothing. Then an update whose delete by
// specification finds no such rule on the host fails the restore and
// changes nothing.
func TestRuleEditsWithIptables(t *testing.T) {
	_, run := rootNetns(t, "edits")
	mustRun := func(stdin []byte, args ...string) []byte {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	save := func() (*Saved, []byte) {
		t.Helper()
		var text []byte
		for _, table := range []string{TableFilter, TableNAT} {
			text = append(text, mustRun(nil, "iptables-save", "-t", table)...)
		}
		saved, err := ParseSave(text)
		if err != nil {
			t.Fatal(err)
		}
		return saved, text
	}

	m := SyntheticModel(200, 2)
	for i := range 50 {
		m.Services[i].Ports[0].Endpoints = nil
	}
	r := NewRenderer()
	prev := r.Render(m, testOptions)
	for _, b := range prev.TextBatches(nil, 100) {
		mustRun(b, "iptables-restore", "--noflush")
	}
	for _, h := range append(Hooks(), GuardHooks()...) {
		mustRun(nil, append([]string{"iptables", "-t", h.Table, "-I", h.Chain, "1"}, h.Args...)...)
	}

	rnd := rand.New(rand.NewPCG(4, 6))
	stash := map[string][]Endpoint{}
	editSteps, added := 0, 0
	for step := range 25 {
		for range 1 + rnd.IntN(3) {
			s := &m.Services[rnd.IntN(len(m.Services))]
			p := &s.Ports[0]
			switch rnd.IntN(6) {
			case 0, 1, 2: // last endpoint gone, or first ready
				if p.Endpoints != nil {
					stash[s.Name], p.Endpoints = p.Endpoints, nil
				} else {
					p.Endpoints = stash[s.Name]
					if p.Endpoints == nil {
						p.Endpoints = []Endpoint{ready("10.245.0.7", 8080)}
					}
				}
			case 3:
				if len(p.Endpoints) > 0 {
					p.Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, 1, byte(rnd.IntN(250))})
				}
			case 4: // a Local policy without a local endpoint: a DROP in the guard
				s.InternalLocal = !s.InternalLocal
			case 5: // a Service gone, a new one
				i := rnd.IntN(len(m.Services))
				m.Services = slices.Delete(slices.Clone(m.Services), i, i+1)
				added++
				m.Services = append(m.Services, Service{Namespace: "new", Name: fmt.Sprint("svc-", added),
					ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 97, 0, byte(added)})},
					Ports:      []Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: []Endpoint{ready("10.245.2.1", 8080)}}}})
			}
		}
		next := r.Render(m, testOptions)
		batches := UpdateBatches(prev, next, 1+rnd.IntN(40))
		text := bytes.Join(batches, nil)
		if bytes.Contains(text, []byte("\n-D ")) || bytes.Contains(text, []byte("\n-I ")) {
			editSteps++
		}
		for i, b := range batches {
			if _, err := run(b, "iptables-restore", "--noflush"); err != nil {
				t.Fatalf("step %d, restore %d: %v\n%s", step, i, err, b)
			}
		}
		saved, savedText := save()
		if again, st := next.FullSyncBatches(saved, 0); again != nil || st.Unpredicted != 0 {
			t.Fatalf("step %d: the host differs from the full text (%+v):\n%s\nupdate:\n%s\nsaved:\n%s", step, st, bytes.Join(again, nil), text, savedText)
		}
		prev = next
	}
	t.Logf("%d of 25 updates used rule edits", editSteps)
	if editSteps < 10 {
		t.Fatalf("only %d of 25 updates used rule edits", editSteps)
	}

	// A delete by specification of a rule the host lacks fails the restore.
	i := slices.IndexFunc(m.Services, func(s Service) bool { return len(s.Ports[0].Endpoints) == 0 })
	if i < 0 {
		t.Fatal("no Service without endpoints left")
	}
	gone := prev.Table(TableFilter)
	ci := slices.IndexFunc(gone, func(c Chain) bool { return c.Name == ChainServices })
	reject := gone[ci].Rules[slices.IndexFunc(gone[ci].Rules, func(r string) bool {
		return strings.Contains(r, fmt.Sprintf("%q", m.Services[i].Namespace+"/"+m.Services[i].Name+":http has no endpoints"))
	})]
	mustRun([]byte("*filter\n-D "+ChainServices+" "+reject+"\nCOMMIT\n"), "iptables-restore", "--noflush")
	before, _ := save()
	m.Services[i].Ports[0].Endpoints = []Endpoint{ready("10.245.3.1", 8080)}
	next := r.Render(m, testOptions)
	update := Update(prev, next)
	if !bytes.Contains(update, []byte("-D "+ChainServices+" "+reject+"\n")) {
		t.Fatalf("the update does not delete the REJECT rule:\n%s", update)
	}
	if _, err := run(update, "iptables-restore", "--noflush"); err == nil {
		t.Fatalf("an update deleting a rule the host lacks succeeded:\n%s", update)
	}
	if after, _ := save(); !bytes.Equal(before.Text(), after.Text()) { // Text: without the times in comments
		t.Fatalf("the failed update changed the host:\nbefore:\n%s\nafter:\n%s", before.Text(), after.Text())
	}
}
