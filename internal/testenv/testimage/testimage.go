// Package testimage builds container images at test time, never from the internet: a
// busybox image from the host's static busybox, an HTTP test server on top of it, and the
// means to ship them (a docker-archive tarball, an in-process registry, a push).
package testimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubette/kubette/internal/testenv/needs"
)

// BusyboxPath is where Debian's busybox-static installs the static busybox.
const BusyboxPath = "/bin/busybox"

// DefaultPath is the PATH the test images set.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Applets returns the busybox applets Busybox links into /bin (besides /bin/busybox itself).
func Applets() []string {
	return []string{
		"sh", "echo", "cat", "ls", "sleep", "env", "id", "wget", "nc", "httpd", "ps", "kill",
		"true", "false", "mkdir", "touch", "hostname", "dd", "head", "tail", "grep", "yes", "timeout",
	}
}

// epoch is the modification time of every file in the test images, so that building an
// image twice gives the same digests.
func epoch() time.Time { return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }

// Busybox returns a single-layer image holding the host's static busybox as /bin/busybox,
// the applet symlinks of Applets() in /bin, /etc/passwd and /etc/group with root and nobody,
// and /tmp; its command is ["sh"]. Without a static busybox (Debian package busybox-static)
// the test is skipped, or fails in CI.
func Busybox(t testing.TB) v1.Image {
	t.Helper()
	layer := busyboxLayer(t)
	return image(t, []v1.Layer{layer}, v1.Config{Cmd: []string{"sh"}, Env: []string{DefaultPath}})
}

// busyboxLayer builds the one layer of Busybox.
func busyboxLayer(t testing.TB) v1.Layer {
	t.Helper()
	bin := staticBusybox(t)
	files := []file{
		{name: "bin/", mode: 0o755},
		{name: "etc/", mode: 0o755},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
		{name: "bin/busybox", mode: 0o755, data: bin},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\n")},
	}
	for _, a := range Applets() {
		files = append(files, file{name: "bin/" + a, link: "busybox"})
	}
	return layerOf(t, files)
}

// staticBusybox reads BusyboxPath and checks that it is statically linked (no PT_INTERP),
// so that it runs in an image without a dynamic loader.
func staticBusybox(t testing.TB) []byte {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + " (apt-get install -y busybox-static)"
		if needs.InCI() {
			t.Fatalf("CI must provide this: %s", msg)
		}
		t.Skipf("skipping: %s", msg)
	}
	f, err := elf.Open(BusyboxPath)
	if err != nil {
		missing("needs a static busybox at %s: %v", BusyboxPath, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			missing("needs a static busybox at %s, but it is dynamically linked", BusyboxPath)
		}
	}
	b, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatalf("read busybox: %v", err)
	}
	return b
}

// HTTPServer returns an image with the busybox layer of Busybox and, on top, the program
// in ./httpserver compiled statically at test time as /server; its entrypoint is ["/server"].
// The compiled program is cached on disk by the hash of its source and the Go version.
func HTTPServer(t testing.TB) v1.Image {
	t.Helper()
	bin := serverBinary(t)
	server := layerOf(t, []file{{name: "server", mode: 0o755, data: bin}})
	return image(t, []v1.Layer{busyboxLayer(t), server}, v1.Config{
		Entrypoint:   []string{"/server"},
		Env:          []string{DefaultPath},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
	})
}

// image assembles an image for linux on this machine's architecture.
func image(t testing.TB, layers []v1.Layer, cfg v1.Config) v1.Image {
	t.Helper()
	cf, err := empty.Image.ConfigFile()
	if err != nil {
		t.Fatalf("empty image config: %v", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch()}
	cf.Config = cfg
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		t.Fatalf("image config: %v", err)
	}
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatalf("append layers: %v", err)
	}
	return img
}

// file is one entry of a test layer: a directory (name ends in "/"), a symlink (link set)
// or a regular file.
type file struct {
	name string
	mode int64
	data []byte
	link string
}

// layerOf builds an uncompressed tar of files, owned by root, and wraps it as a layer.
func layerOf(t testing.TB, files []file) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch(), Format: tar.FormatPAX}
		switch {
		case f.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.link, 0o777
		case f.name[len(f.name)-1] == '/':
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar %s: %v", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatalf("tar %s: %v", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	gz := compressedCached(t, buf.Bytes())
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil })
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	return l
}

// compressedCached returns the gzip of the tar b, compressing it only once per machine:
// the result is kept in the temp directory under b's digest. (Under the race detector,
// compressing busybox takes seconds, and go-containerregistry would compress an
// uncompressed layer again for every digest and every copy.)
func compressedCached(t testing.TB, b []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(b)
	p := filepath.Join(cacheDir(), "layers", hex.EncodeToString(sum[:])+".tar.gz")
	if gz, err := os.ReadFile(p); err == nil {
		return gz
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatalf("gzip layer: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("gzip layer: %v", err)
	}
	if err := writeCached(p, buf.Bytes()); err != nil {
		t.Logf("cache compressed layer: %v", err) // only a lost speed-up
	}
	return buf.Bytes()
}

// cacheDir is where test images keep what is costly to make.
func cacheDir() string { return filepath.Join(os.TempDir(), "kubette-testimage") }

// writeCached writes b to p through a private temporary file and a rename, so that
// concurrent test processes never see half a file.
func writeCached(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

// WriteTarball writes img tagged ref as a docker-archive tarball (what `docker save`
// writes) into dir and returns the file's path.
func WriteTarball(t testing.TB, dir, ref string, img v1.Image) string {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatalf("tag %q: %v", ref, err)
	}
	p := filepath.Join(dir, safeFileName(tag.String())+".tar")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatalf("write tarball of %s: %v", ref, err)
	}
	return p
}

// safeFileName replaces what is awkward in a file name.
func safeFileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}
