package poll_test

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/poll"
)

// recorder is a testing.TB whose Fatalf records the message and returns instead of
// ending the goroutine.
type recorder struct {
	testing.TB
	fatal []string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	poll.Until(r, "the third call", func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if len(r.fatal) != 0 {
		t.Fatalf("failed: %q", r.fatal)
	}
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

func TestUntilWithinFailsWithWhatAndTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	poll.UntilWithin(r, 20*time.Millisecond, "the impossible", func() error {
		calls++
		return fmt.Errorf("still no (call %d)", calls)
	})
	if len(r.fatal) != 1 {
		t.Fatalf("Fatalf called %d times, want once: %q", len(r.fatal), r.fatal)
	}
	msg := r.fatal[0]
	last := "still no (call " + strconv.Itoa(calls) + ")"
	if !strings.Contains(msg, "the impossible") || !strings.Contains(msg, last) {
		t.Errorf("message %q does not name what was waited for and the last error %q", msg, last)
	}
	if calls < 2 {
		t.Errorf("cond called %d times: the wait did not poll", calls)
	}
}

// TestConditionMayFailTheTest shows the condition runs on the test's goroutine: a
// t.Fatal inside it ends a subtest like any other.
func TestConditionMayFailTheTest(t *testing.T) {
	var inner *testing.T
	ended := false
	t.Run("fatal inside", func(t *testing.T) {
		inner = t
		defer func() { ended = true }()
		poll.Until(&recorder{TB: t}, "never reached", func() error {
			t.SkipNow() // ends the subtest through runtime.Goexit, as t.Fatal would, without failing the parent
			return nil
		})
		t.Error("Until went on after the condition ended the test")
	})
	if !ended || !inner.Skipped() {
		t.Errorf("the subtest was not ended by its condition (ended %v, skipped %v)", ended, inner.Skipped())
	}
}

func TestAdapters(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		cond func() error
		want string // "" for nil
	}{
		{"True yes", poll.True(func() bool { return true }), ""},
		{"True no", poll.True(func() bool { return false }), "condition still false"},
		{"Check yes", poll.Check(func() (bool, error) { return true, nil }), ""},
		{"Check yes despite an error", poll.Check(func() (bool, error) { return true, boom }), ""},
		{"Check no", poll.Check(func() (bool, error) { return false, nil }), "condition still false"},
		{"Check no with a reason", poll.Check(func() (bool, error) { return false, boom }), "boom"},
		{"Explain yes", poll.Explain(func() (bool, string) { return true, "fine" }), ""},
		{"Explain no", poll.Explain(func() (bool, string) { return false, "phase Pending" }), "phase Pending"},
	} {
		err := c.cond()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	port := poll.FreePort(t)
	if port <= 0 || port > 65535 {
		t.Fatalf("port %d", port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	_ = l.Close()
}
