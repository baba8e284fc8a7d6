package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/kubette/kubette/internal/testenv/needs"
)

func unpackEntries(t *testing.T, root string, entries ...entry) error {
	t.Helper()
	return unpack(bytes.NewReader(tarOf(t, entries...)), root)
}

func TestUnpackWhiteouts(t *testing.T) {
	needs.Root(t) // whiteouts are character devices and trusted.* xattrs
	root := t.TempDir()
	err := unpackEntries(t, root,
		entry{name: "etc/", typ: tar.TypeDir},
		entry{name: "etc/.wh.passwd"},
		entry{name: ".wh.gone"},
		entry{name: "opaque/", typ: tar.TypeDir},
		entry{name: "opaque/.wh..wh..opq"},
		entry{name: "opaque/kept", data: "x"},
		entry{name: "implicit/.wh..wh..opq"}, // the directory has no entry of its own
		entry{name: ".wh..wh.plnk"},          // AUFS metadata: ignored
		entry{name: "lower/file", data: "x"},
		entry{name: "lower/.wh.file"}, // a whiteout replaces what this layer had
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"etc/passwd", "gone", "lower/file"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 || st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s: want a 0/0 character device owned by root, got mode %o rdev %d uid %d", p, st.Mode, st.Rdev, st.Uid)
		}
	}
	for _, d := range []string{"opaque", "implicit"} {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(filepath.Join(root, d), opaqueXattr, buf)
		if err != nil || string(buf[:n]) != "y" {
			t.Errorf("%s: %s = %q, %v; want y", d, opaqueXattr, buf[:n], err)
		}
	}
	for _, p := range []string{".wh.gone", "etc/.wh.passwd", "opaque/.wh..wh..opq", ".wh..wh.plnk"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s was written as a file", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "opaque/kept")); err != nil || string(b) != "x" {
		t.Errorf("opaque/kept: %q %v", b, err)
	}
}

func TestUnpackKeepsAttributes(t *testing.T) {
	root := t.TempDir()
	err := unpackEntries(t, root,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o711},
		entry{name: "bin/tool", mode: 0o4755, data: "#!/bin/sh\n", uid: 1000, gid: 1001},
		entry{name: "bin/alias", typ: tar.TypeSymlink, link: "tool"},
		entry{name: "bin/abs", typ: tar.TypeSymlink, link: "/etc/passwd"}, // content, never followed
		entry{name: "bin/hard", typ: tar.TypeLink, link: "bin/tool"},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		entry{name: "pipe", typ: tar.TypeFifo, mode: 0o600},
		entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		entry{name: "replaced", data: "old"},
		entry{name: "replaced", data: "new"},
		entry{name: "cap", data: "x", xattrs: map[string]string{"user.kubette": "v", "trusted.overlay.opaque": "y"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	mode := func(p string) fs.FileMode {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return fi.Mode()
	}
	if m := mode("bin"); m.Perm() != 0o711 || !m.IsDir() {
		t.Errorf("bin: %v", m)
	}
	if m := mode("bin/tool"); m.Perm() != 0o755 || m&fs.ModeSetuid == 0 {
		t.Errorf("bin/tool: %v, want setuid 0755", m)
	}
	if m := mode("tmp"); m&fs.ModeSticky == 0 || m.Perm() != 0o777 {
		t.Errorf("tmp: %v, want sticky 0777", m)
	}
	if m := mode("pipe"); m&fs.ModeNamedPipe == 0 {
		t.Errorf("pipe: %v", m)
	}
	for link, want := range map[string]string{"bin/alias": "tool", "bin/abs": "/etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(root, link)); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, want)
		}
	}
	var a, b syscall.Stat_t
	syscall.Stat(filepath.Join(root, "bin/tool"), &a)
	syscall.Stat(filepath.Join(root, "bin/hard"), &b)
	if a.Ino != b.Ino {
		t.Errorf("bin/hard is not a hard link of bin/tool")
	}
	if os.Geteuid() == 0 && (a.Uid != 1000 || a.Gid != 1001) {
		t.Errorf("bin/tool owned by %d:%d, want 1000:1001", a.Uid, a.Gid)
	}
	if fi, _ := os.Stat(filepath.Join(root, "bin/tool")); !fi.ModTime().Equal(testTime) {
		t.Errorf("bin/tool mtime %v, want %v", fi.ModTime(), testTime)
	}
	if fi, _ := os.Stat(filepath.Join(root, "bin")); !fi.ModTime().Equal(testTime) {
		t.Errorf("bin mtime %v, want %v (directory times are set last)", fi.ModTime(), testTime)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "replaced")); string(got) != "new" {
		t.Errorf("replaced: %q", got)
	}
	if n, err := unix.Lgetxattr(filepath.Join(root, "cap"), opaqueXattr, make([]byte, 8)); err == nil {
		t.Errorf("a layer's trusted.overlay xattr was applied (%d bytes)", n)
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
	}{
		{"dotdot", []entry{{name: "../evil", data: "x"}}},
		{"nested dotdot", []entry{{name: "a/../../evil", data: "x"}}},
		{"through symlink", []entry{{name: "link", typ: tar.TypeSymlink, link: "../outside"}, {name: "link/evil", data: "x"}}},
		{"through absolute symlink", []entry{{name: "link", typ: tar.TypeSymlink, link: "/"}, {name: "link/evil", data: "x"}}},
		{"hard link out", []entry{{name: "evil", typ: tar.TypeLink, link: "../outside/secret"}}},
		{"hard link through symlink", []entry{{name: "link", typ: tar.TypeSymlink, link: "../outside"}, {name: "evil", typ: tar.TypeLink, link: "link/secret"}}},
		{"whiteout through symlink", []entry{{name: "link", typ: tar.TypeSymlink, link: "../outside"}, {name: "link/.wh.secret"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
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
			if err := unpackEntries(t, root, tc.entries...); err == nil {
				t.Errorf("unpack succeeded")
			}
			assertOnly(t, base, "root", "outside", "outside/secret")
		})
	}
}

// assertOnly checks that below base exist exactly the given paths and anything under root.
func assertOnly(t *testing.T, base string, want ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, w := range want {
		allowed[w] = true
	}
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(base, p)
		if rel == "." || rel == "root" || strings.HasPrefix(rel, "root/") {
			return nil
		}
		if !allowed[rel] {
			t.Errorf("unpack wrote %s outside the root", rel)
		}
		return nil
	})
	if b, err := os.ReadFile(filepath.Join(base, "outside", "secret")); err == nil && string(b) != "s" {
		t.Errorf("outside/secret was changed to %q", b)
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"./":       "",
		".":        "",
		"/":        "",
		"a/b/":     "a/b",
		"/etc/x":   "etc/x",
		"./a/./b":  "a/b",
		"a/../b":   "b",
		"/../etc":  "etc",
		"a//b":     "a/b",
		"..a":      "..a",
		".wh..opq": ".wh..opq",
	} {
		if got, err := cleanName(in); err != nil || got != want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../", "a/../..", "../a"} {
		if _, err := cleanName(in); err == nil {
			t.Errorf("cleanName(%q) accepted", in)
		}
	}
}

func TestUnpackRefusesSparseFiles(t *testing.T) {
	// A PAX GNU sparse 0.1 entry that claims 1 PiB of holes before one byte of data
	// (tar.Writer will not write one, so the blocks are made by hand).
	records := paxRecord("GNU.sparse.size", "1125899906842624") + paxRecord("GNU.sparse.numblocks", "1") +
		paxRecord("GNU.sparse.map", "1125899906842623,1")
	var b []byte
	b = append(b, rawBlock("PaxHeaders/huge", 'x', len(records))...)
	b = append(b, padBlock([]byte(records))...)
	b = append(b, rawBlock("huge", '0', 1)...)
	b = append(b, padBlock([]byte{1})...)
	b = append(b, make([]byte, 1024)...)
	root := t.TempDir()
	if err := unpack(bytes.NewReader(b), root); err == nil || !strings.Contains(err.Error(), "sparse files are not supported") {
		t.Errorf("unpack of a sparse file: %v", err)
	}
}

// paxRecord is one "LEN key=value\n" record, LEN counting itself.
func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	for {
		rec := fmt.Sprintf("%d %s=%s\n", n, k, v)
		if len(rec) == n {
			return rec
		}
		n = len(rec)
	}
}

// rawBlock is a ustar header block.
func rawBlock(name string, typ byte, size int) []byte {
	b := make([]byte, 512)
	copy(b, name)
	copy(b[100:], "0000644\x00")
	copy(b[108:], "0000000\x00")
	copy(b[116:], "0000000\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	copy(b[136:], "00000000000\x00")
	b[156] = typ
	copy(b[257:], "ustar\x0000")
	copy(b[148:], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func padBlock(b []byte) []byte {
	return append(b, make([]byte, (512-len(b)%512)%512)...)
}

func TestDecompress(t *testing.T) {
	plain := tarOf(t, entry{name: "f", data: "hello"})
	var gz, zs bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	enc, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(plain)
	enc.Close()
	for name, in := range map[string][]byte{"plain": plain, "gzip": gz.Bytes(), "zstd": zs.Bytes()} {
		rc, err := decompress(bytes.NewReader(in))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		out, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(out, plain) {
			t.Errorf("%s: got %d bytes, %v", name, len(out), err)
		}
	}
}
