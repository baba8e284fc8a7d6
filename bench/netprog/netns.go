package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// netns is a throwaway network namespace standing in for a node: the pod's
// address on its lo with a TCP listener, the service CIDR routed to lo so
// that the namespace's own packets to a ClusterIP reach the nat and filter
// hooks (as a default route does on a real host).
type netns struct {
	name string
}

// newNetns creates the namespace and sets it up; on failure nothing is left.
func newNetns(podIP netip.Addr, serviceCIDR netip.Prefix) (_ *netns, err error) {
	n := &netns{name: fmt.Sprintf("kbt-netprog-%d-%d", os.Getpid(), rand.IntN(1<<30))}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", n.name, err, out)
	}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", podIP.String() + "/32", "dev", "lo"},
		{"ip", "route", "add", serviceCIDR.String(), "dev", "lo", "src", podIP.String()},
	} {
		if err := n.exec(args...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// prefix runs a command in the namespace (proxy.ExecRunner's Prefix).
func (n *netns) prefix() []string { return []string{"ip", "netns", "exec", n.name} }

func (n *netns) exec(args ...string) error {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("in netns %s: %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
	return nil
}

// close deletes the namespace, and with it its links, addresses, routes and
// every iptables and nftables rule the proxy wrote there.
func (n *netns) close() {
	if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "ip netns del %s: %v: %s\n", n.name, err, out)
	}
}

// enter runs f on an OS thread that joined the namespace. The thread stays
// locked and ends with the goroutine, so it never serves other goroutines
// in the wrong namespace. Sockets f creates belong to the namespace.
func (n *netns) enter(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := unix.Open(filepath.Join("/var/run/netns", n.name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", n.name, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", n.name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// listen serves TCP on addr inside the namespace: every connection is
// accepted and closed. It stops when ctx is done.
func (n *netns) listen(ctx context.Context, addr netip.AddrPort) error {
	var l net.Listener
	if err := n.enter(func() (err error) {
		l, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		return fmt.Errorf("listen on %s in the namespace: %w", addr, err)
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			c.Close()
		}
	}()
	return nil
}

// probeResult is what a probe loop saw until its condition held.
type probeResult struct {
	// at is when the first probe that met the condition returned.
	at time.Time
	// probes counts the connects made; others those that ended neither in a
	// connection nor in "connection refused" (a timeout, say).
	probes, others int
	lastOther      error
}

// probeReq asks the prober to connect until a connect succeeds (live) or is
// refused (!live).
type probeReq struct {
	live     bool
	deadline time.Time
	done     chan probeResultOrErr
}

type probeResultOrErr struct {
	res probeResult
	err error
}

// prober connects to one ClusterIP:port from inside the namespace, on a
// thread of its own there, every interval while asked to.
type prober struct {
	target   netip.AddrPort
	interval time.Duration
	reqs     chan probeReq
}

// startProber starts the probing thread; it ends when ctx is done.
func (n *netns) startProber(ctx context.Context, target netip.AddrPort, interval time.Duration) (*prober, error) {
	p := &prober{target: target, interval: interval, reqs: make(chan probeReq)}
	started := make(chan error, 1)
	go func() {
		err := n.enter(func() error {
			started <- nil
			p.loop(ctx)
			return nil
		})
		if err != nil {
			started <- err // f never ran
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *prober) loop(ctx context.Context) {
	for {
		var req probeReq
		select {
		case <-ctx.Done():
			return
		case req = <-p.reqs:
		}
		var res probeResult
		var err error
		for {
			ok, perr := connectOnce(p.target)
			at := time.Now()
			res.probes++
			switch {
			case ok == req.live && (ok || errors.Is(perr, unix.ECONNREFUSED)):
				res.at = at
			case !ok && !errors.Is(perr, unix.ECONNREFUSED):
				res.others++
				res.lastOther = perr
			}
			if !res.at.IsZero() {
				break
			}
			if ctx.Err() != nil {
				err = ctx.Err()
				break
			}
			if at.After(req.deadline) {
				err = fmt.Errorf("%s: not %s after %d probes (%d neither connected nor refused, last: %v)",
					p.target, map[bool]string{true: "connecting", false: "refused"}[req.live], res.probes, res.others, res.lastOther)
				break
			}
			time.Sleep(p.interval)
		}
		req.done <- probeResultOrErr{res, err}
	}
}

// probe starts a probe loop and returns a function that waits for its end.
func (p *prober) probe(ctx context.Context, live bool, timeout time.Duration) (func() (probeResult, error), error) {
	req := probeReq{live: live, deadline: time.Now().Add(timeout), done: make(chan probeResultOrErr, 1)}
	select {
	case p.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return func() (probeResult, error) {
		r := <-req.done
		return r.res, r.err
	}, nil
}

// connectOnce makes one TCP connect to target with plain system calls on the
// calling thread (so in its namespace) and closes it with a reset (no
// TIME_WAIT). It reports whether the connect succeeded and, if not, why.
func connectOnce(target netip.AddrPort) (bool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	// A connect that gets no answer (a DROP, a lost SYN) gives up after
	// 200 ms; REJECT answers at once.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Usec: 200_000}); err != nil {
		return false, fmt.Errorf("SO_SNDTIMEO: %w", err)
	}
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return false, fmt.Errorf("SO_LINGER: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: target.Addr().As4(), Port: int(target.Port())}); err != nil {
		return false, err
	}
	return true, nil
}
