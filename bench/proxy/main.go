// Command proxy measures kubette's service proxy rules at scale: rendering
// N Services × E endpoints to iptables-restore text, and applying it with the
// real iptables-restore inside a throwaway network namespace (when run as
// root with iptables installed; render-only otherwise). It prints plain lines
// meant to be pasted into a report.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubette/kubette/internal/proxy"
	"github.com/kubette/kubette/internal/proxy/iptables"
)

func main() {
	services := flag.String("services", "1000,10000", "comma-separated Service counts to measure")
	endpoints := flag.Int("endpoints", 10, "ready endpoints per Service")
	runs := flag.Int("runs", 3, "one-endpoint changes measured per size (median and max printed)")
	apply := flag.String("apply", "auto", "apply into a throwaway network namespace: auto (when root with iptables-restore), yes, no")
	mode := flag.String("mode", "iptables", "the proxy mode to measure: iptables or nftables (one nft -f transaction per sync)")
	flag.BoolVar(&hooks, "hooks", true, "iptables mode: after the full sync, install the jumps from the built-in chains (PREROUTING, OUTPUT, ...) as the proxy does; every later commit then validates the chains they reach (false: as the figures measured before this flag, which lacked them)")
	flag.IntVar(&batchChains, "batch-chains", -1, "per-service chains per iptables-restore (0: one restore; -1: the proxy's choice, proxy.ChainsPerRestore)")
	flag.Parse()
	if *mode != "iptables" && *mode != "nftables" {
		fmt.Fprintf(os.Stderr, "bad --mode %q: iptables or nftables\n", *mode)
		os.Exit(2)
	}
	doApply := *apply == "yes"
	if *apply == "auto" {
		tool := "iptables-restore"
		if *mode == "nftables" {
			tool = "nft"
		}
		_, err := exec.LookPath(tool)
		doApply = os.Geteuid() == 0 && err == nil
	}
	fmt.Printf("proxy bench: mode %s, %d endpoints per Service, apply=%v\n", *mode, *endpoints, doApply)
	for _, s := range strings.Split(*services, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n > 60000 {
			fmt.Fprintf(os.Stderr, "bad --services entry %q\n", s)
			os.Exit(2)
		}
		f := measure
		if *mode == "nftables" {
			f = measureNft
		}
		if err := f(n, *endpoints, *runs, doApply); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
	}
}

var (
	batchChains int
	hooks       bool
)

var opts = iptables.Options{
	ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
	ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
}

// netns is a throwaway network namespace.
type netns struct {
	name   string
	runner proxy.ExecRunner
}

func newNetns() (*netns, error) {
	// On SIGINT/SIGTERM the namespace goes too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	name := fmt.Sprintf("kbt-bench-%d-%d", os.Getpid(), rand.IntN(1<<30))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	n := &netns{name: name, runner: proxy.ExecRunner{Prefix: []string{"ip", "netns", "exec", name}}}
	go func() {
		<-sig
		n.close()
		os.Exit(130)
	}()
	return n, nil
}

func (n *netns) close() {
	if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "ip netns del %s: %v: %s\n", n.name, err, out)
	}
}

func measure(n, e, runs int, apply bool) error {
	ctx := context.Background()
	m := iptables.SyntheticModel(n, e)
	renderer := iptables.NewRenderer()
	t0 := time.Now()
	rs := renderer.Render(m, opts)
	render := time.Since(t0)
	t1 := time.Now()
	text := rs.Text(nil)
	textTime := time.Since(t1)
	rules := strings.Count(string(text), "\n-A ")
	if batchChains < 0 {
		batchChains = proxy.ChainsPerRestore(len(rs.NAT))
		defer func() { batchChains = -1 }()
	}
	fmt.Printf("%d services: %d chains, %d rules, %.1f MB of restore text\n", n, len(rs.Filter)+len(rs.NAT), rules, float64(len(text))/1e6)
	line := fmt.Sprintf("  full sync:          render %v + text %v", render.Round(time.Millisecond), textTime.Round(time.Millisecond))

	var ns *netns
	if apply {
		var err error
		if ns, err = newNetns(); err != nil {
			return err
		}
		defer ns.close()
		if err := ns.runner.Restore(ctx, iptables.GuardText(opts)); err != nil {
			return err
		}
		t2 := time.Now()
		savedText, err := ns.runner.Save(ctx)
		if err != nil {
			return err
		}
		saved, err := iptables.ParseSave(savedText)
		if err != nil {
			return err
		}
		batches, _ := rs.FullSyncBatches(saved, batchChains)
		save := time.Since(t2)
		t3 := time.Now()
		cpu0 := childCPU()
		for _, b := range batches {
			if err := ns.runner.Restore(ctx, b); err != nil {
				return err
			}
		}
		restore := time.Since(t3)
		user, sys := childCPU().sub(cpu0)
		line += fmt.Sprintf(" + iptables-save %v + iptables-restore %v (%d restores; CPU %v user + %v sys) = %v", save.Round(time.Millisecond), restore.Round(time.Millisecond),
			len(batches), user.Round(time.Millisecond), sys.Round(time.Millisecond), (render + textTime + save + restore).Round(time.Millisecond))
		if hooks {
			// As the proxy's full sync ends: the jumps from the built-in
			// chains. Without them no KUBE- chain is reachable from a base
			// chain and the kernel's commit skips validating them.
			for _, h := range iptables.Hooks() {
				if _, err := ns.runner.Iptables(ctx, append([]string{"-t", h.Table, "-A", h.Chain}, h.Args...)...); err != nil {
					return fmt.Errorf("install the %s %s hook: %w", h.Table, h.Chain, err)
				}
			}
			line += "; hooks installed"
		}
	} else {
		line += fmt.Sprintf(" = %v (render only)", (render + textTime).Round(time.Millisecond))
	}
	fmt.Println(line)
	if ns != nil {
		// A proxy restarts over its own rules: a fresh Renderer, the full sync
		// against iptables-save. Unchanged, then with one Service changed
		// while no proxy ran.
		for _, changed := range []bool{false, true} {
			if changed {
				m.Services[n/2].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 246, 0, 1})
			}
			if err := restart(ctx, ns, m, changed); err != nil {
				return err
			}
		}
		rs = renderer.Render(m, opts)
	}

	// One endpoint of one Service changes (a pod replaced): render the model
	// again (the Renderer renders only the changed Service), diff (only that
	// Service's chains and the fixed chains), apply only the changed chains.
	prev := rs
	series := func(label string, change func(k int)) error {
		var renders, diffs, applies, totals []time.Duration
		var partialBytes int
		cpu0 := childCPU()
		for k := range runs {
			change(k)
			a := time.Now()
			next := renderer.Render(m, opts)
			b := time.Now()
			upd := iptables.UpdateBatches(prev, next, batchChains)
			c := time.Now()
			if upd == nil {
				return fmt.Errorf("%s: a change gave no update", label)
			}
			partialBytes = 0
			for _, b := range upd {
				partialBytes += len(b)
				if ns != nil {
					if err := ns.runner.Restore(ctx, b); err != nil {
						return fmt.Errorf("%s: partial restore: %w", label, err)
					}
				}
			}
			d := time.Now()
			renders, diffs, applies, totals = append(renders, b.Sub(a)), append(diffs, c.Sub(b)), append(applies, d.Sub(c)), append(totals, d.Sub(a))
			prev = next
		}
		restore := fmt.Sprintf(" + iptables-restore %v", median(applies))
		if ns == nil {
			restore = " (render only)"
		}
		user, sys := childCPU().sub(cpu0)
		fmt.Printf("  %-20s render %v + diff %v%s = %v median, %v max (%d runs, %.1f kB of restore text; tools' CPU %v per change)\n",
			label+":", median(renders), median(diffs), restore, median(totals), slices.Max(totals).Round(100*time.Microsecond), runs,
			float64(partialBytes)/1e3, ((user + sys) / time.Duration(runs)).Round(time.Millisecond))
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(n), 1))
	if err := series("one-endpoint change", func(k int) {
		m.Services[r.IntN(n)].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, byte(k >> 8), byte(k)})
	}); err != nil {
		return err
	}
	// A Service's last ready endpoint goes and comes back (its rule moves
	// between the nat and the filter table's KUBE-SERVICES: REJECT <-> the
	// jump to its KUBE-SVC chain), one change per run, alternating.
	var stash []iptables.Endpoint
	target := r.IntN(n)
	if err := series("last/first endpoint", func(k int) {
		p := &m.Services[target].Ports[0]
		if k%2 == 0 {
			stash, p.Endpoints = p.Endpoints, nil
		} else {
			p.Endpoints, stash = stash, nil
		}
	}); err != nil {
		return err
	}

	// Nothing changed (a resync event): render and diff only.
	a := time.Now()
	if iptables.UpdateBatches(prev, renderer.Render(m, opts), batchChains) != nil {
		return fmt.Errorf("an unchanged model gave an update")
	}
	fmt.Printf("  no change:           render + diff %v, nothing applied\n", time.Since(a).Round(time.Millisecond))

	if ns != nil {
		// Check the host holds exactly what the last full text says.
		saved, err := ns.runner.Save(ctx)
		if err != nil {
			return err
		}
		if got, want := strings.Count(string(saved), "\n-A KUBE-"), strings.Count(string(prev.Text(nil)), "\n-A "); got != want {
			return fmt.Errorf("after the partial restores the namespace holds %d rules, the full text %d", got, want)
		}
		fmt.Printf("  check:               the namespace holds the %d rules of the full text\n", rules)
	}
	return nil
}

// restart measures a restarted proxy's first (full) sync over the rules in
// ns: render with a fresh Renderer, iptables-save, parse, compare, restore
// what differs.
func restart(ctx context.Context, ns *netns, m iptables.Model, changed bool) error {
	cpu0 := childCPU()
	var self0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	t0 := time.Now()
	rs := iptables.NewRenderer().Render(m, opts)
	t1 := time.Now()
	text, err := ns.runner.Save(ctx)
	if err != nil {
		return err
	}
	t2 := time.Now()
	saved, err := iptables.ParseSave(text)
	if err != nil {
		return err
	}
	t3 := time.Now()
	batches, st := rs.FullSyncBatches(saved, batchChains)
	t4 := time.Now()
	size := 0
	for _, b := range batches {
		size += len(b)
		if err := ns.runner.Restore(ctx, b); err != nil {
			return err
		}
	}
	t5 := time.Now()
	user, sys := childCPU().sub(cpu0)
	var self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	selfCPU := time.Duration(self1.Utime.Nano() + self1.Stime.Nano() - self0.Utime.Nano() - self0.Stime.Nano())
	what := "restart, unchanged:  "
	if changed {
		what = "restart, 1 changed:  "
	}
	fmt.Printf("  %s render %v + iptables-save %v + parse %v + compare %v + iptables-restore %v (%d restores, %.1f kB; %d chains unchanged, %d written, %d deleted) = %v; CPU tools %v user + %v sys, bench process %v\n",
		what, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond), t4.Sub(t3).Round(time.Millisecond),
		t5.Sub(t4).Round(time.Millisecond), len(batches), float64(size)/1e3, st.Unchanged, st.Changed, st.Stale, t5.Sub(t0).Round(time.Millisecond),
		user.Round(time.Millisecond), sys.Round(time.Millisecond), selfCPU.Round(time.Millisecond))
	if changed == (batches == nil) {
		return fmt.Errorf("restart (changed %v) wrote %d restores", changed, len(batches))
	}
	return nil
}

// cpuTimes are the user and system CPU time of the finished child processes
// (the iptables tools): on this shared machine wall time mostly measures the
// load, CPU time the work.
type cpuTimes struct{ user, sys time.Duration }

func childCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return cpuTimes{}
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func (c cpuTimes) sub(o cpuTimes) (user, sys time.Duration) { return c.user - o.user, c.sys - o.sys }

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Microsecond)
}
