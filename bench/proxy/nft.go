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

	"github.com/kubette/kubette/internal/proxy/iptables"
	"github.com/kubette/kubette/internal/proxy/nftables"
)

// selfCPU is this process's CPU time (render, text, netlink encoding and,
// for the netlink transaction, the kernel's work, done in sendmsg).
func selfCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// cost is what one measured step took: wall time, CPU of the nft
// processes and of this process.
type cost struct {
	wall                           time.Duration
	nftUser, nftSys, selfU, selfSy time.Duration
}

func measureCost(f func() error) (cost, error) {
	c0, s0 := childCPU(), selfCPU()
	t := time.Now()
	err := f()
	var c cost
	c.wall = time.Since(t)
	c.nftUser, c.nftSys = childCPU().sub(c0)
	c.selfU, c.selfSy = selfCPU().sub(s0)
	return c, err
}

func (c cost) cpu() time.Duration { return c.nftUser + c.nftSys + c.selfU + c.selfSy }

func (c cost) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%v wall; CPU %v = nft %v user + %v sys, bench process %v user + %v sys",
		r(c.wall), r(c.cpu()), r(c.nftUser), r(c.nftSys), r(c.selfU), r(c.selfSy))
}

// measureNft measures the nftables mode in a throwaway namespace: a full
// sync as the proxy does it (a fresh Applier: render, then the new
// generation of the shared sets through netlink between two small nft
// transactions), the same ruleset as one `nft -f` of FullText for
// comparison, restarts over it, one-endpoint changes and endpoint count
// changes (the Applier's partial syncs).
func measureNft(n, e, runs int, apply bool) error {
	ctx := context.Background()
	m := iptables.SyntheticModel(n, e)
	t0 := time.Now()
	rs := nftables.NewRenderer().Render(m, opts)
	render := time.Since(t0)
	t1 := time.Now()
	text := nftables.FullText(rs)
	textTime := time.Since(t1)
	fmt.Printf("%d services: %s, %.1f MB of nft text; render %v + text %v\n", n, rs.Summary(), float64(len(text))/1e6,
		render.Round(time.Millisecond), textTime.Round(time.Millisecond))
	if !apply {
		return measureNftRenderOnly(m, n, runs)
	}
	ns, err := newNetns()
	if err != nil {
		return err
	}
	defer ns.close()
	run := nftables.ExecRunner{Prefix: ns.runner.Prefix}
	if err := nftables.NewApplier(run).InstallGuard(ctx, opts); err != nil {
		return err
	}
	var ap *nftables.Applier
	sync := func(full bool) func() error {
		return func() error {
			if full {
				ap = nftables.NewApplier(run)
			}
			_, err := ap.Sync(ctx, m, opts, full)
			return err
		}
	}
	c, err := measureCost(sync(true))
	if err != nil {
		return err
	}
	fmt.Printf("  full sync (netlink):  %v\n", c)
	c, err = measureCost(func() error {
		_, err := run.Nft(ctx, nftables.FullText(nftables.Render(m, opts)), "-f", "-")
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("  full sync (one nft -f of FullText, for comparison): %v\n", c)
	for _, changed := range []bool{false, true} {
		if changed {
			m.Services[n/2].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 246, 0, 1})
		}
		c, err := measureCost(sync(true))
		if err != nil {
			return err
		}
		what := "restart, unchanged:  "
		if changed {
			what = "restart, 1 changed:  "
		}
		fmt.Printf("  %s %v\n", what, c)
	}

	// One endpoint of one Service changes: a partial sync (render that
	// Service, diff, one nft transaction of element deletes and adds).
	r := rand.New(rand.NewPCG(uint64(n), 1))
	var costs []cost
	for k := range runs {
		i := r.IntN(n)
		m.Services[i].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, byte(k >> 8), byte(k)})
		c, err := measureCost(sync(false))
		if err != nil {
			return fmt.Errorf("partial update: %w", err)
		}
		costs = append(costs, c)
	}
	printPartial("one-endpoint change:", costs)
	// One Service gains an endpoint and loses it again: its keys move to the
	// endpoint map of e+1 (declared with its chain the first time) and back.
	costs = costs[:0]
	for k := range runs {
		p := &m.Services[r.IntN(n)].Ports[0]
		p.Endpoints = append(p.Endpoints, iptables.Endpoint{IP: netip.AddrFrom4([4]byte{10, 247, byte(k >> 8), byte(k)}), Port: 8080, Ready: true, Serving: true})
		c, err := measureCost(sync(false))
		if err != nil {
			return fmt.Errorf("endpoint count change: %w", err)
		}
		costs = append(costs, c)
		p.Endpoints = p.Endpoints[:len(p.Endpoints)-1]
		if c, err = measureCost(sync(false)); err != nil {
			return fmt.Errorf("endpoint count change: %w", err)
		}
		costs = append(costs, c)
	}
	printPartial("endpoint count change:", costs)
	c, err = measureCost(sync(false))
	if err != nil {
		return err
	}
	fmt.Printf("  no change:            %v, nothing applied\n", c)

	out, err := run.Nft(ctx, nil, "-t", "list", "table", "ip", nftables.Table)
	if err != nil {
		return err
	}
	final := nftables.Render(m, opts)
	if got := strings.Count(string(out), "\tchain "); got != len(final.Chains) {
		return fmt.Errorf("after the partial updates the table holds %d chains, the ruleset %d", got, len(final.Chains))
	}
	fmt.Printf("  check:                the table holds the %d chains of the ruleset\n", len(final.Chains))
	return nil
}

func printPartial(what string, costs []cost) {
	pick := func(f func(cost) time.Duration) []time.Duration {
		var d []time.Duration
		for _, c := range costs {
			d = append(d, f(c))
		}
		return d
	}
	walls := pick(func(c cost) time.Duration { return c.wall })
	fmt.Printf("  %-21s %v wall median (%v max), CPU %v median = nft %v + bench process %v (%d runs)\n", what,
		median(walls), slices.Max(walls).Round(100*time.Microsecond), median(pick(cost.cpu)),
		median(pick(func(c cost) time.Duration { return c.nftUser + c.nftSys })),
		median(pick(func(c cost) time.Duration { return c.selfU + c.selfSy })), len(costs))
}

// measureNftRenderOnly is the proxy's share without a namespace: render
// and diff of one-endpoint changes.
func measureNftRenderOnly(m iptables.Model, n, runs int) error {
	renderer := nftables.NewRenderer()
	prev := renderer.Render(m, opts)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	var totals []time.Duration
	for k := range runs {
		m.Services[r.IntN(n)].Ports[0].Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 245, byte(k >> 8), byte(k)})
		a := time.Now()
		next := renderer.Render(m, opts)
		if upd, ok := nftables.UpdateText(prev, next); !ok || len(upd) == 0 {
			return fmt.Errorf("a changed endpoint gave no update")
		}
		totals = append(totals, time.Since(a))
		prev = next
	}
	fmt.Printf("  one-endpoint change: render + diff %v median (%d runs, render only)\n", median(totals), runs)
	return nil
}
