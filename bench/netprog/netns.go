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

// netns is a throwaway network namespace standing in for a node: the pods'
// addresses on its lo with TCP listeners, the service CIDR routed to lo so
// that the namespace's own packets to a ClusterIP reach the nat and filter
// hooks (as a default route does on a real host).
type netns struct {
	name string
}

// newNetns creates the namespace and sets it up; on failure nothing is left.
func newNetns(podIPs []netip.Addr, serviceCIDR netip.Prefix) (_ *netns, err error) {
	n := &netns{name: fmt.Sprintf("kbt-netprog-%d-%d", os.Getpid(), rand.IntN(1<<30))}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", n.name, err, out)
	}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	cmds := [][]string{{"ip", "link", "set", "lo", "up"}}
	for _, a := range podIPs {
		cmds = append(cmds, []string{"ip", "addr", "add", a.String() + "/32", "dev", "lo"})
	}
	cmds = append(cmds, []string{"ip", "route", "add", serviceCIDR.String(), "dev", "lo", "src", podIPs[0].String()})
	for _, args := range cmds {
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

// listen serves TCP on addr inside the namespace: every connection gets the
// one byte answer and is closed. It stops when ctx is done.
func (n *netns) listen(ctx context.Context, addr netip.AddrPort, answer byte) error {
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
			_, _ = c.Write([]byte{answer})
			c.Close()
		}
	}()
	return nil
}

// The listeners' answers: the pod whose readiness changes, and the peer that
// stays ready beside it.
const (
	answerTarget = 'T'
	answerPeer   = 'P'
)

// goneRun is how many connections in a row must reach the peer before the
// target counts as out of rotation (with two endpoints picked at random, a
// run of 50 while the target is still in is a 2^-50 chance).
const goneRun = 50

// want is what a probe loop waits for.
type want int

const (
	wantConnect   want = iota // a connect succeeds
	wantRefused               // a connect is refused
	wantTarget                // a connection is answered by the target
	wantNotTarget             // goneRun connections in a row answered by the peer
)

func (w want) String() string {
	return [...]string{"a connection", "connection refused", "a connection to the target", fmt.Sprintf("%d connections in a row to the peer", goneRun)}[w]
}

// probeResult is what a probe loop saw until its condition held.
type probeResult struct {
	// at is when the first probe that met the condition returned (for
	// wantNotTarget: the first of the run).
	at time.Time
	// probes counts the connects made; others those that ended neither in
	// a connection nor in "connection refused" (a timeout, say) or, waiting
	// for the target to go, were refused.
	probes, others int
	lastOther      error
	// cpu is the probing thread's CPU time (user + system: the connects'
	// way through the rules is kernel time of this thread).
	cpu time.Duration
}

// probeReq asks the prober to connect to target until w holds.
type probeReq struct {
	target   netip.AddrPort
	w        want
	deadline time.Time
	done     chan probeResultOrErr
}

type probeResultOrErr struct {
	res probeResult
	err error
}

// prober connects to ClusterIP:ports from inside the namespace, on a thread
// of its own there, every interval while asked to.
type prober struct {
	interval time.Duration
	reqs     chan probeReq
}

// startProber starts the probing thread; it ends when ctx is done.
func (n *netns) startProber(ctx context.Context, interval time.Duration) (*prober, error) {
	p := &prober{interval: interval, reqs: make(chan probeReq)}
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
		cpu0 := threadCPU()
		res, err := p.until(ctx, req)
		res.cpu = threadCPU() - cpu0
		req.done <- probeResultOrErr{res, err}
	}
}

// until probes req.target until req.w holds, ctx is done or the deadline
// passed.
func (p *prober) until(ctx context.Context, req probeReq) (probeResult, error) {
	var res probeResult
	var run int // wantNotTarget: connections to the peer in a row
	var runStart time.Time
	read := req.w == wantTarget || req.w == wantNotTarget
	for {
		answer, err := connectOnce(req.target, read)
		at := time.Now()
		res.probes++
		refused := errors.Is(err, unix.ECONNREFUSED)
		if err != nil && (!refused || read) {
			res.others++
			res.lastOther = err
		}
		switch req.w {
		case wantConnect:
			if err == nil {
				res.at = at
			}
		case wantRefused:
			if refused {
				res.at = at
			}
		case wantTarget:
			if err == nil && answer == answerTarget {
				res.at = at
			}
		case wantNotTarget:
			if err != nil || answer != answerPeer {
				run = 0
				break
			}
			if run == 0 {
				runStart = at
			}
			if run++; run == goneRun {
				res.at = runStart
			}
		}
		if !res.at.IsZero() {
			return res, nil
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if at.After(req.deadline) {
			return res, fmt.Errorf("%s: no %v after %d probes (%d failed otherwise, last: %v)",
				req.target, req.w, res.probes, res.others, res.lastOther)
		}
		time.Sleep(p.interval)
	}
}

// threadCPU is the calling thread's CPU time (user + system).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// probe starts a probe loop and returns a function that waits for its end.
func (p *prober) probe(ctx context.Context, target netip.AddrPort, w want, timeout time.Duration) (func() (probeResult, error), error) {
	req := probeReq{target: target, w: w, deadline: time.Now().Add(timeout), done: make(chan probeResultOrErr, 1)}
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
// calling thread (so in its namespace), reads the listener's one-byte
// answer when read is set, and closes the connection with a reset (no
// TIME_WAIT).
func connectOnce(target netip.AddrPort, read bool) (byte, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	// A connect or read that gets no answer (a DROP, a lost SYN) gives up
	// after 200 ms; REJECT answers at once.
	tv := unix.Timeval{Usec: 200_000}
	for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return 0, fmt.Errorf("socket timeout: %w", err)
		}
	}
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return 0, fmt.Errorf("SO_LINGER: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: target.Addr().As4(), Port: int(target.Port())}); err != nil {
		return 0, err
	}
	if !read {
		return 0, nil
	}
	var b [1]byte
	n, err := unix.Read(fd, b[:])
	switch {
	case err != nil:
		return 0, fmt.Errorf("read the answer: %w", err)
	case n != 1:
		return 0, errors.New("read the answer: the connection closed without one")
	}
	return b[0], nil
}
