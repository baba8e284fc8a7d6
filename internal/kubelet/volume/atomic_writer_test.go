package volume

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func readVisible(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, "..") {
			if info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if info.Mode()&os.ModeSymlink != 0 {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if fi.IsDir() {
				return filepath.Walk(p+"/", func(q string, info os.FileInfo, err error) error {
					if err != nil || info.IsDir() {
						return err
					}
					b, err := os.ReadFile(q)
					r, _ := filepath.Rel(dir, filepath.Clean(q))
					out[r] = string(b)
					return err
				})
			}
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func timestampDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.Name() != dataDirName {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWriteAtomicLayoutAndUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	changed, err := WriteAtomic(dir, map[string]File{
		"a":          {Data: []byte("1"), Mode: 0o644},
		"sub/b.conf": {Data: []byte("2"), Mode: 0o600},
	})
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	if got := readVisible(t, dir); got["a"] != "1" || got["sub/b.conf"] != "2" || len(got) != 2 {
		t.Fatalf("content = %v", got)
	}
	for name, want := range map[string]string{"a": "..data/a", "sub": "..data/sub"} {
		if l, err := os.Readlink(filepath.Join(dir, name)); err != nil || l != want {
			t.Errorf("%s links to %q (%v), want %q", name, l, err, want)
		}
	}
	ts := timestampDirs(t, dir)
	if len(ts) != 1 || !strings.HasPrefix(ts[0], "..20") {
		t.Fatalf("timestamped dirs = %v", ts)
	}
	if l, _ := os.Readlink(filepath.Join(dir, dataDirName)); l != ts[0] {
		t.Fatalf("..data -> %q, want %q", l, ts[0])
	}
	info, err := os.Stat(filepath.Join(dir, "sub/b.conf"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode of sub/b.conf = %v (%v)", info.Mode(), err)
	}

	// The same payload writes nothing.
	if changed, err := WriteAtomic(dir, map[string]File{
		"a":          {Data: []byte("1"), Mode: 0o644},
		"sub/b.conf": {Data: []byte("2"), Mode: 0o600},
	}); err != nil || changed {
		t.Fatalf("unchanged write: changed=%v err=%v", changed, err)
	}

	// An update swaps content, drops a name and the old timestamped dir.
	if changed, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("new"), Mode: 0o644}, "c": {Data: []byte("3"), Mode: 0o644}}); err != nil || !changed {
		t.Fatalf("update: changed=%v err=%v", changed, err)
	}
	if got := readVisible(t, dir); len(got) != 2 || got["a"] != "new" || got["c"] != "3" {
		t.Fatalf("content after update = %v", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("sub still visible: %v", err)
	}
	if ts2 := timestampDirs(t, dir); len(ts2) != 1 || ts2[0] == ts[0] {
		t.Errorf("timestamped dirs after update = %v (before %v)", ts2, ts)
	}
	// A mode change alone is a change.
	if changed, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("new"), Mode: 0o400}, "c": {Data: []byte("3"), Mode: 0o644}}); err != nil || !changed {
		t.Fatalf("mode update: changed=%v err=%v", changed, err)
	}
	// Empty payload empties the volume.
	if _, err := WriteAtomic(dir, map[string]File{}); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir); len(got) != 0 {
		t.Fatalf("content after empty write = %v", got)
	}
}

func TestWriteAtomicRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", "/abs", "../out", "a/../../out", "..data", "..x/y"} {
		dir := t.TempDir()
		if _, err := WriteAtomic(dir, map[string]File{p: {Data: []byte("x"), Mode: 0o644}}); err == nil {
			t.Errorf("path %q accepted", p)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("path %q left %d entries", p, len(entries))
		}
	}
}

// Readers going through ..data never see a mix of two versions, a missing key or a partial file.
func TestWriteAtomicReadersSeeOneVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	payload := func(v string) map[string]File {
		return map[string]File{
			"x": {Data: []byte(strings.Repeat(v, 4096)), Mode: 0o644},
			"y": {Data: []byte(strings.Repeat(v, 4096)), Mode: 0o644},
		}
	}
	if _, err := WriteAtomic(dir, payload("a")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	var reads atomic.Int64
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				// Resolve ..data once, as a reader of a consistent snapshot does.
				ts, err := os.Readlink(filepath.Join(dir, dataDirName))
				if err != nil {
					bad.Store("readlink: " + err.Error())
					return
				}
				x, errx := os.ReadFile(filepath.Join(dir, ts, "x"))
				y, erry := os.ReadFile(filepath.Join(dir, ts, "y"))
				if os.IsNotExist(errx) || os.IsNotExist(erry) {
					continue // that version was removed after the swap: fine
				}
				if errx != nil || erry != nil || len(x) != 4096 || string(x) != string(y) {
					bad.Store("mixed or partial read")
					return
				}
				// The user-visible name always resolves.
				if b, err := os.ReadFile(filepath.Join(dir, "x")); os.IsNotExist(err) {
					continue // resolved to the old version just as it was removed
				} else if err != nil || len(b) != 4096 {
					bad.Store("visible x: " + string(b[:min(len(b), 8)]))
					return
				}
				reads.Add(1)
			}
		})
	}
	for i := range 200 {
		if _, err := WriteAtomic(dir, payload(string(rune('a'+i%26)))); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if len(timestampDirs(t, dir)) != 1 {
		t.Fatalf("old timestamped dirs left: %v", timestampDirs(t, dir))
	}
}
