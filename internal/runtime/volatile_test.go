package runtime

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubette/kubette/internal/testenv/needs"
)

// TestMountVolatile mounts a tmpfs on each volatile directory of a fresh runtime directory,
// leaves them alone on a second call, and leaves a directory that already holds records on
// disk.
func TestMountVolatile(t *testing.T) {
	needs.Root(t)
	dir := filepath.Join(t.TempDir(), "runtime")
	t.Cleanup(func() {
		for _, d := range volatileDirs {
			_ = unix.Unmount(filepath.Join(dir, d.name), unix.MNT_DETACH)
		}
	})
	// The sandboxes directory of an earlier runtime that kept it on disk, with a record.
	record := filepath.Join(dir, "sandboxes", "abc", "meta.json")
	if err := os.MkdirAll(filepath.Dir(record), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for range 2 {
		if err := mountVolatile(dir, log); err != nil {
			t.Fatalf("mountVolatile: %v", err)
		}
	}
	if got := tmpfsMounts(t, dir); len(got) != len(volatileDirs)-1 || slices.Contains(got, filepath.Join(dir, "sandboxes")) {
		t.Errorf("tmpfs mounts below %s = %q, want each volatile directory's but the sandboxes' (once)", dir, got)
	}
	if _, err := os.Stat(record); err != nil {
		t.Errorf("the record on disk: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "runc"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o711 {
		t.Errorf("runc root mode %v, want 0711", fi.Mode().Perm())
	}

	// A new directory gets them all.
	dir2 := filepath.Join(t.TempDir(), "runtime")
	t.Cleanup(func() {
		for _, d := range volatileDirs {
			_ = unix.Unmount(filepath.Join(dir2, d.name), unix.MNT_DETACH)
		}
	})
	if err := mountVolatile(dir2, log); err != nil {
		t.Fatalf("mountVolatile: %v", err)
	}
	if got := tmpfsMounts(t, dir2); len(got) != len(volatileDirs) {
		t.Errorf("tmpfs mounts below %s = %q, want one on each of %d volatile directories", dir2, got, len(volatileDirs))
	}
}

// tmpfsMounts lists the tmpfs mount points below dir, from /proc/self/mountinfo.
func tmpfsMounts(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 5 || !strings.HasPrefix(post, "tmpfs ") {
			continue
		}
		if strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
