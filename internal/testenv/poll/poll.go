// Package poll waits, in tests, for a condition to come true. It calls the
// condition on the test's own goroutine (so the condition may use t.Fatal), with a
// pause between calls and a generous deadline — the machines that run the tests are
// loaded and a test must never fail on time alone — and fails the test with what it
// waited for and the condition's last answer. FreePort picks a loopback TCP port for
// a server the test is about to start.
package poll

import (
	"errors"
	"net"
	"testing"
	"time"
)

// Timeout is the deadline Until gives a condition.
const Timeout = 60 * time.Second

// Interval is the pause between two calls of a condition once it has been false for
// a while; the first pauses are shorter (1 ms, doubling up to Interval) so a
// condition that comes true at once costs a test almost nothing.
const Interval = 50 * time.Millisecond

// errFalse is what True and Check report for a condition that is still false and
// gives no reason.
var errFalse = errors.New("condition still false")

// Until calls cond until it returns nil; if Timeout passes first it fails t with
// what and cond's last error.
func Until(t testing.TB, what string, cond func() error) {
	t.Helper()
	UntilWithin(t, Timeout, what, cond)
}

// UntilWithin is Until with deadline d, for the few waits that need a longer one
// (or a test of its own that must time out quickly).
func UntilWithin(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
			return // a testing.TB whose Fatalf returns must not poll on
		}
		time.Sleep(pause)
		pause = min(2*pause, Interval)
	}
}

// True adapts a condition that only says yes or no.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errFalse
	}
}

// Check adapts a condition that says whether it holds and, while it does not,
// perhaps why (an error). An error does not end the wait: it is only the reason
// shown if the deadline passes.
func Check(cond func() (bool, error)) func() error {
	return func() error {
		ok, err := cond()
		switch {
		case ok:
			return nil
		case err != nil:
			return err
		default:
			return errFalse
		}
	}
}

// Explain adapts a condition that says whether it holds and describes the state it
// saw, which is shown if the deadline passes.
func Explain(cond func() (bool, string)) func() error {
	return func() error {
		ok, state := cond()
		if ok {
			return nil
		}
		return errors.New(state)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (the kernel
// picked it for a listener this function closed again).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
