package runc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/runtime/oci"
)

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExecStream(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sleep", "1000"}, nil)
	ctx := context.Background()

	var out, errOut bytes.Buffer
	code, err := f.rt.ExecStream(ctx, c.id, []string{"sh", "-c", "cat; echo oops >&2; exit 3"}, StreamOptions{
		Stdin: strings.NewReader("hello\nworld\n"), Stdout: &out, Stderr: &errOut,
	})
	if err != nil || code != 3 || out.String() != "hello\nworld\n" || errOut.String() != "oops\n" {
		t.Errorf("ExecStream = %d, %v, stdout %q, stderr %q; want 3, nil, \"hello\\nworld\\n\", \"oops\\n\"", code, err, out.String(), errOut.String())
	}
	// No stdin: the process reads end of file at once.
	out.Reset()
	code, err = f.rt.ExecStream(ctx, c.id, []string{"cat"}, StreamOptions{Stdout: &out})
	if err != nil || code != 0 || out.Len() != 0 {
		t.Errorf("ExecStream without stdin = %d, %v, %q; want 0, nil, \"\"", code, err, out.String())
	}
	if _, err := f.rt.ExecStream(ctx, c.id, []string{"/no/such/binary"}, StreamOptions{Stdout: &out}); err == nil {
		t.Error("ExecStream of a missing binary: want an error")
	}
	// A cancelled exec is killed.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := f.rt.ExecStream(cctx, c.id, []string{"sleep", "998"}, StreamOptions{Stdout: &out}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ExecStream past its context: %v, want DeadlineExceeded", err)
	}
	waitFor(t, "the cancelled exec to be gone", func() bool {
		out, _, _, err := f.rt.Exec(ctx, c.id, []string{"ps", "-o", "args"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return !strings.Contains(string(out), "sleep 998")
	})
}

func TestExecStreamTTY(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sleep", "1000"}, nil)
	ctx := context.Background()

	inR, inW := io.Pipe()
	defer inW.Close()
	resize := make(chan TermSize, 1)
	resize <- TermSize{Width: 123, Height: 45}
	var out syncBuffer
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := f.rt.ExecStream(ctx, c.id, []string{"sh", "-c", "tty; while read l; do [ \"$l\" = quit ] && exit 5; stty size; done"},
			StreamOptions{Stdin: inR, Stdout: &out, TTY: true, Resize: resize})
		done <- result{code, err}
	}()
	// The resize reaches the process's terminal asynchronously: ask for its size until it
	// has the new one.
	waitFor(t, "the terminal to be 45x123", func() bool {
		if _, err := io.WriteString(inW, "size\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		return strings.Contains(out.String(), "45 123")
	})
	if !strings.Contains(out.String(), "/dev/pts/") {
		t.Errorf("tty output %q names no /dev/pts terminal", out.String())
	}
	// The terminal echoes input and ends lines with \r\n, as a terminal does.
	if !strings.Contains(out.String(), "size\r\n") {
		t.Errorf("tty output %q: no echo of the input", out.String())
	}
	if _, err := io.WriteString(inW, "quit\n"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.code != 5 {
		t.Errorf("tty ExecStream = %d, %v; want 5, nil", r.code, r.err)
	}
}

func TestAttach(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	// Output only: the container's output from now on, until ctx ends.
	ticker := f.run(t, []string{"sh", "-c", "i=0; while true; do echo tick $i; echo tock $i >&2; i=$((i+1)); sleep 0.1; done"}, nil)
	var out, errOut syncBuffer
	actx, cancel := context.WithCancel(ctx)
	attached := make(chan error, 1)
	go func() { attached <- f.rt.Attach(actx, ticker.id, AttachOptions{Stdout: &out, Stderr: &errOut}) }()
	waitFor(t, "attached output", func() bool {
		return strings.Contains(out.String(), "tick ") && strings.Contains(errOut.String(), "tock ")
	})
	cancel()
	if err := <-attached; !errors.Is(err, context.Canceled) {
		t.Errorf("Attach after cancel = %v, want context.Canceled", err)
	}
	if strings.Contains(out.String(), "tock") || strings.Contains(errOut.String(), "tick") {
		t.Errorf("streams mixed: stdout %q, stderr %q", out.String(), errOut.String())
	}

	// stdin with stdin_once: what the session sends reaches the container, and the end of the
	// session's stdin closes the container's.
	echo := f.run(t, []string{"sh", "-c", "while read l; do echo got $l; done; echo bye"}, func(in *oci.Input) {
		in.Container.Annotations = map[string]string{AnnotationStdin: "true", AnnotationStdinOnce: "true"}
	})
	var echoed syncBuffer
	attached = make(chan error, 1)
	go func() {
		attached <- f.rt.Attach(ctx, echo.id, AttachOptions{Stdin: strings.NewReader("one\ntwo\n"), Stdout: &echoed})
	}()
	select {
	case err := <-attached:
		if err != nil {
			t.Errorf("Attach = %v once the container exited, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Attach did not return after the container's stdin closed")
	}
	if got := echoed.String(); got != "got one\ngot two\nbye\n" {
		t.Errorf("attached output %q, want \"got one\\ngot two\\nbye\\n\"", got)
	}
	if st := f.waitStopped(t, echo.id); st.ExitCode != 0 {
		t.Errorf("echo container exit code %d, want 0", st.ExitCode)
	}
}
