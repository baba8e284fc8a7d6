package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tailCRILog counts entries (lines of the file) as upstream's log reader does: a partial entry
// gives its text without a newline.
func TestTailCRILog(t *testing.T) {
	path := writeFile(t, t.TempDir()+"/0.log",
		"2026-01-01T00:00:00Z stdout F one\n2026-01-01T00:00:00Z stderr P tw\n2026-01-01T00:00:00Z stderr F o\n2026-01-01T00:00:00Z stdout F three\n")
	for _, tc := range []struct {
		lines, bytes int
		want         string
	}{
		{2, 100, "o\nthree\n"},
		{3, 100, "two\nthree\n"},
		{80, 100, "one\ntwo\nthree\n"},
		{80, 7, "o\nthree\n"[1:]},
	} {
		if got := tailCRILog(path, tc.lines, tc.bytes); got != tc.want {
			t.Errorf("tail(%d, %d) = %q, want %q", tc.lines, tc.bytes, got, tc.want)
		}
	}
	// "echo -n DONE": the runtime writes the unterminated line as a partial entry.
	done := writeFile(t, t.TempDir()+"/0.log", "2026-01-01T00:00:00Z stdout P DONE\n")
	if got := tailCRILog(done, 80, 2048); got != "DONE" {
		t.Errorf("tail of a partial last line = %q", got)
	}
}

func TestTailCRILogLimits(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "2026-01-01T00:00:00.123456789Z stdout F line %03d %s\n", i, strings.Repeat("x", 40))
	}
	path := writeFile(t, t.TempDir()+"/0.log", b.String())
	got := tailCRILog(path, fallbackLogLines, fallbackLogBytes)
	if len(got) != fallbackLogBytes || !strings.HasSuffix(got, "line 199 "+strings.Repeat("x", 40)+"\n") {
		t.Errorf("tail: %d bytes, ends %q", len(got), got[max(0, len(got)-60):])
	}
	// A log larger than the window tailCRILog reads still gives the last entries whole.
	var big strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&big, "2026-01-01T00:00:00Z stderr F %05d %s\n", i, strings.Repeat("y", 30))
	}
	path = writeFile(t, t.TempDir()+"/1.log", big.String())
	got = tailCRILog(path, 3, 2048)
	want := ""
	for i := 2997; i < 3000; i++ {
		want += fmt.Sprintf("%05d %s\n", i, strings.Repeat("y", 30))
	}
	if got != want {
		t.Errorf("tail of a big log = %q", got)
	}
}

// The termination message: what the container wrote to its file (its last 4096 bytes), else,
// with FallbackToLogsOnError and a failure, the tail of its log.
func TestTerminationMessage(t *testing.T) {
	h := newHarness(t)
	c := containerNamed("a", "img")
	c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{c},
	}})
	h.sync(pod)
	fc := h.container(pod, "a")
	logPath := filepath.Join(podLogDir(h.k.cfg.LogDir, pod), "a", "0.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, logPath, "2026-01-01T00:00:00Z stdout P DONE\n")
	h.rt.Lock()
	fc.LogPath = logPath
	h.rt.Unlock()
	h.exit(fc, 1)
	p := h.sync(pod)
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.Message != "DONE" {
		t.Fatalf("terminated %+v, want message DONE", term)
	}

	// What the container wrote to its file wins; a long one is cut to its end.
	msgFile := h.k.terminationLogPath(pod.UID, "a", 0)
	long := strings.Repeat("a", 100) + strings.Repeat("b", int(maxTerminationMessage))
	writeFile(t, msgFile, long)
	rt, err := readRuntime(t.Context(), h.rt, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.k.terminationMessage(pod, &pod.Spec.Containers[0], rt.latest("a")); got != strings.Repeat("b", int(maxTerminationMessage)) {
		t.Errorf("message from the file: %d bytes, starts %q", len(got), got[:10])
	}
	// Exit 0: no fallback to the log.
	writeFile(t, msgFile, "")
	h.rt.Lock()
	fc.ExitCode = 0
	h.rt.Unlock()
	rt, _ = readRuntime(t.Context(), h.rt, pod.UID)
	if got := h.k.terminationMessage(pod, &pod.Spec.Containers[0], rt.latest("a")); got != "" {
		t.Errorf("message of a succeeded container = %q", got)
	}
}
