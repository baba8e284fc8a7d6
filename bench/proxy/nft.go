package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kubette/kubette/internal/proxy/nftables"
)

// measureNft measures the nftables mode: render the model to one table
// (internal/proxy/nftables), write it with one `nft -f` transaction in a
// throwaway namespace, restart over it, change one endpoint.
func measureNft(n, e, runs int, apply bool) error {
	ctx := context.Background()
	m := model(n, e)
	renderer := nftables.NewRenderer()
	t0 := time.Now()
	rs := renderer.Render(m, opts)
	render := time.Since(t0)
	t1 := time.Now()
	text := nftables.FullText(rs)
	textTime := time.Since(t1)
	fmt.Printf("%d services: %s, %.1f MB of nft text\n", n, rs.Summary(), float64(len(text))/1e6)
	line := fmt.Sprintf("  full sync:          render %v + text %v", render.Round(time.Millisecond), textTime.Round(time.Millisecond))
	var nft nftables.Runner
	if apply {
		ns, err := newNetns()
		if err != nil {
			return err
		}
		defer ns.close()
		nft = nftables.ExecRunner{Prefix: ns.runner.Prefix}
		if err := nftables.NewApplier(nft).InstallGuard(ctx, opts); err != nil {
			return err
		}
		cpu0 := childCPU()
		t2 := time.Now()
		if _, err := nft.Nft(ctx, text, "-f", "-"); err != nil {
			return err
		}
		apply := time.Since(t2)
		user, sys := childCPU().sub(cpu0)
		line += fmt.Sprintf(" + nft -f %v (one transaction; CPU %v user + %v sys) = %v", apply.Round(time.Millisecond),
			user.Round(time.Millisecond), sys.Round(time.Millisecond), (render + textTime + apply).Round(time.Millisecond))
	} else {
		line += fmt.Sprintf(" = %v (render only)", (render + textTime).Round(time.Millisecond))
	}
	fmt.Println(line)
	if nft != nil {
		// A restarted proxy's first sync: a fresh Applier replaces the
		// whole table in one transaction (unchanged, then with one Service
		// changed while no proxy ran).
		for _, changed := range []bool{false, true} {
			if changed {
				m.Services[n/2].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 246, 0, 1})
			}
			cpu0 := childCPU()
			var self0, self1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
			t := time.Now()
			res, err := nftables.NewApplier(nft).Sync(ctx, m, opts, true)
			if err != nil {
				return err
			}
			took := time.Since(t)
			user, sys := childCPU().sub(cpu0)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
			selfCPU := time.Duration(self1.Utime.Nano() + self1.Stime.Nano() - self0.Utime.Nano() - self0.Stime.Nano())
			what := "restart, unchanged:  "
			if changed {
				what = "restart, 1 changed:  "
			}
			fmt.Printf("  %s render + text + nft -f = %v (%.1f MB, one transaction); CPU nft %v user + %v sys, bench process %v\n",
				what, took.Round(time.Millisecond), float64(res.Bytes)/1e6, user.Round(time.Millisecond), sys.Round(time.Millisecond), selfCPU.Round(time.Millisecond))
		}
		rs = renderer.Render(m, opts)
	}

	// One endpoint of one Service changes: render (only that Service again),
	// diff, write the difference in one transaction.
	var renders, diffs, applies, totals, cpus []time.Duration
	var partialBytes int
	prev := rs
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for k := range runs {
		i := r.IntN(n)
		m.Services[i].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, byte(k >> 8), byte(k)})
		a := time.Now()
		next := renderer.Render(m, opts)
		b := time.Now()
		upd, ok := nftables.UpdateText(prev, next)
		c := time.Now()
		if !ok || len(upd) == 0 {
			return fmt.Errorf("a changed endpoint gave no update")
		}
		partialBytes = len(upd)
		cpu0 := childCPU()
		if nft != nil {
			if _, err := nft.Nft(ctx, upd, "-f", "-"); err != nil {
				return fmt.Errorf("partial update: %w", err)
			}
		}
		user, sys := childCPU().sub(cpu0)
		d := time.Now()
		renders, diffs, applies, totals = append(renders, b.Sub(a)), append(diffs, c.Sub(b)), append(applies, d.Sub(c)), append(totals, d.Sub(a))
		cpus = append(cpus, user+sys)
		prev = next
	}
	write := fmt.Sprintf(" + nft -f %v (CPU %v)", median(applies), median(cpus))
	if nft == nil {
		write = " (render only)"
	}
	fmt.Printf("  one-endpoint change: render %v + diff %v%s = %v median, %v max (%d runs, %.1f kB of nft text)\n",
		median(renders), median(diffs), write, median(totals), slices.Max(totals).Round(100*time.Microsecond), runs, float64(partialBytes)/1e3)

	a := time.Now()
	if upd, ok := nftables.UpdateText(prev, renderer.Render(m, opts)); !ok || len(upd) != 0 {
		return fmt.Errorf("an unchanged model gave an update")
	}
	fmt.Printf("  no change:           render + diff %v, nothing applied\n", time.Since(a).Round(time.Millisecond))

	if nft != nil {
		out, err := nft.Nft(ctx, nil, "list", "table", "ip", nftables.Table)
		if err != nil {
			return err
		}
		if got := strings.Count(string(out), "\tchain "); got != len(prev.Chains) {
			return fmt.Errorf("after the partial updates the table holds %d chains, the ruleset %d", got, len(prev.Chains))
		}
		fmt.Printf("  check:               the table holds the %d chains of the ruleset\n", len(prev.Chains))
	}
	return nil
}
