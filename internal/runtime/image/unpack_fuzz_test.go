package image

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzUnpack feeds arbitrary bytes (seeded with hostile tars) to unpack: it must never
// panic and never create or change anything outside the layer root.
func FuzzUnpack(f *testing.F) {
	seeds := [][]entry{
		{{name: "a/b/c", data: "x"}, {name: "a/.wh.b"}, {name: "a/.wh..wh..opq"}},
		{{name: "../evil", data: "x"}},
		{{name: "link", typ: tar.TypeSymlink, link: "../outside"}, {name: "link/evil", data: "x"}},
		{{name: "link", typ: tar.TypeSymlink, link: "/"}, {name: "link", data: "replaced"}},
		{{name: "f", data: "x"}, {name: "h", typ: tar.TypeLink, link: "f"}, {name: "h2", typ: tar.TypeLink, link: "../outside/secret"}},
		{{name: "d/", typ: tar.TypeDir}, {name: "d", data: "file now"}, {name: "d/x", data: "x"}},
		{{name: "dev", typ: tar.TypeChar}, {name: "fifo", typ: tar.TypeFifo}, {name: "blk", typ: tar.TypeBlock}},
	}
	for _, s := range seeds {
		f.Add(tarOf(f, s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := memDir(t)
		root := filepath.Join(base, "root")
		outside := filepath.Join(base, "outside")
		for _, d := range []string{root, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = unpack(bytes.NewReader(data), root)
		assertOnly(t, base, "root", "outside", "outside/secret")
		// t.TempDir's cleanup must be able to remove what unpack made.
		os.Chmod(root, 0o755)
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}

// memDir is a temporary directory on tmpfs (/dev/shm) when there is one: thousands of runs
// a second on a disk that other work keeps busy stall on its journal.
func memDir(t *testing.T) string {
	d, err := os.MkdirTemp("/dev/shm", "kubette-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
