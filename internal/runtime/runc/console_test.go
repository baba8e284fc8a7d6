package runc

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/runtime/oci"
)

// TestAttachTerminal runs containers with a terminal (CRI tty) under real runc: the process's
// stdio is a terminal, an attach session's size and stdin reach it, its output (stderr too)
// comes as stdout to the session and to the log, and the end of a stdin_once session's stdin
// is the terminal's end of file.
func TestAttachTerminal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tty := func(in *oci.Input) {
		in.Container.Tty = true
		in.Container.Annotations = map[string]string{AnnotationStdin: "true", AnnotationStdinOnce: "true"}
	}
	c := f.run(t, []string{"sh", "-c", `test -t 0 && test -t 1 && test -t 2 && echo on-a-tty $TERM
while [ "$(stty size)" != "40 100" ]; do sleep 0.1; done
echo size-ok; read l; echo got-$l; echo oops >&2; exit 7`}, tty)
	inR, inW := io.Pipe()
	defer inW.Close()
	sizes := make(chan TermSize, 1)
	sizes <- TermSize{Width: 100, Height: 40}
	var out, errOut syncBuffer
	attached := make(chan error, 1)
	go func() {
		attached <- f.rt.Attach(ctx, c.id, AttachOptions{Stdin: inR, Stdout: &out, Stderr: &errOut, Resize: sizes})
	}()
	waitFor(t, "the terminal's size", func() bool { return strings.Contains(out.String(), "size-ok") })
	if _, err := io.WriteString(inW, "hello\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-attached:
		if err != nil {
			t.Errorf("Attach = %v once the container exited, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Attach did not return after the container exited")
	}
	if st := f.waitStopped(t, c.id); st.ExitCode != 7 {
		t.Errorf("exit code %d, want 7", st.ExitCode)
	}
	// The terminal echoes the input and ends lines with \r\n; stderr is the terminal too.
	for _, want := range []string{"hello\r\n", "got-hello\r\n", "oops\r\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("attached output %q lacks %q", out.String(), want)
		}
	}
	if errOut.String() != "" {
		t.Errorf("attached stderr %q, want nothing: a terminal has one output", errOut.String())
	}
	var lines []string
	for _, e := range readLog(t, c.log) {
		if e.stream != "stdout" {
			t.Errorf("log entry %+v: a terminal's output is stdout", e)
		}
		lines = append(lines, e.content)
	}
	// Lines end at \r\n in the log as at \n (bufio's ReadLine, as containerd's log).
	for _, want := range []string{"on-a-tty xterm", "size-ok", "got-hello", "oops"} {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("log %q lacks the line %q", lines, want)
		}
	}

	// stdin_once: the end of the session's stdin is ^D, the end of file of cat's input.
	cat := f.run(t, []string{"sh", "-c", "cat; echo cat-done"}, tty)
	var catOut syncBuffer
	go func() {
		attached <- f.rt.Attach(ctx, cat.id, AttachOptions{Stdin: strings.NewReader("abc\n"), Stdout: &catOut})
	}()
	select {
	case err := <-attached:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("Attach = %v, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("cat did not end with its stdin: output %q", catOut.String())
	}
	if st := f.waitStopped(t, cat.id); st.ExitCode != 0 {
		t.Errorf("cat container exit code %d, want 0", st.ExitCode)
	}
	if !strings.Contains(catOut.String(), "cat-done") {
		t.Errorf("cat's output %q lacks cat-done", catOut.String())
	}
}
