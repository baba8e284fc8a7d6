package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check reported instead of failing.
type recorder struct {
	testing.TB
	failed, fatal bool
	msg           string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Name() string                      { return "TestX/sub" }
func (r *recorder) Errorf(format string, args ...any) { r.failed = true; r.msg = format }
func (r *recorder) Fatalf(format string, args ...any) { r.failed, r.fatal = true, true; r.msg = format }

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.golden")
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	Check(r, path, []byte("one\ntwo\n"))
	if r.failed {
		t.Fatalf("equal output failed: %s", r.msg)
	}
	r = &recorder{TB: t}
	Check(r, path, []byte("one\nthree\n"))
	if !r.failed || r.fatal {
		t.Fatalf("different output: failed=%v fatal=%v, want an Errorf", r.failed, r.fatal)
	}
	r = &recorder{TB: t}
	Check(r, filepath.Join(dir, "missing.golden"), []byte("x"))
	if !r.fatal {
		t.Fatal("a missing golden file did not stop the test")
	}
}

func TestCheckUpdate(t *testing.T) {
	old := *update
	*update = true
	t.Cleanup(func() { *update = old })
	path := filepath.Join(t.TempDir(), "new", "b.golden")
	r := &recorder{TB: t}
	Check(r, path, []byte("written\n"))
	if r.failed {
		t.Fatalf("update failed: %s", r.msg)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "written\n" {
		t.Fatalf("file after update = %q, %v", got, err)
	}
}

func TestLineDiff(t *testing.T) {
	if d := LineDiff("a\nb", "a\nb"); d != "" {
		t.Fatalf("equal texts: %q", d)
	}
	d := LineDiff("a\nb\nc", "a\nB")
	for _, want := range []string{"line 2:\n  - b\n  + B\n", "line 3:\n  - c\n  + \n"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff %q lacks %q", d, want)
		}
	}
	if strings.Contains(d, "line 1") {
		t.Errorf("diff %q names an equal line", d)
	}
}
