package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

func loadFile(t *testing.T, s *Store, path string) []Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imgs, err := s.Load(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	return imgs
}

func configID(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestLoadDockerArchiveAndGet(t *testing.T) {
	s := openStore(t)
	bb := testimage.Busybox(t)
	imgs := loadFile(t, s, testimage.WriteTarball(t, t.TempDir(), "busybox", bb))
	id := configID(t, bb)
	if len(imgs) != 1 || imgs[0].ID != id {
		t.Fatalf("loaded %+v, want one image %s", imgs, id)
	}
	img := imgs[0]
	if !slices.Equal(img.RepoTags, []string{"docker.io/library/busybox:latest"}) {
		t.Errorf("tags %v", img.RepoTags)
	}
	if !slices.Equal(img.Config.Cmd, []string{"sh"}) || img.Size == 0 {
		t.Errorf("config cmd %v size %d", img.Config.Cmd, img.Size)
	}
	hex := strings.TrimPrefix(id, "sha256:")
	for _, ref := range []string{"busybox", "busybox:latest", "docker.io/busybox", "docker.io/library/busybox:latest",
		"index.docker.io/library/busybox", id, hex, hex[:12], "sha256:" + hex[:8]} {
		got, err := s.Get(ref)
		if err != nil || got.ID != id {
			t.Errorf("Get(%q) = %s, %v", ref, got.ID, err)
		}
	}
	for _, ref := range []string{"busybox:1", "other", "sha256:" + strings.Repeat("0", 64), "0000"} {
		if _, err := s.Get(ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", ref, err)
		}
	}
	// The layer is unpacked once, with busybox in it.
	layers, _ := os.ReadDir(filepath.Join(s.dir, "layers"))
	if len(layers) != 1 {
		t.Fatalf("%d layer dirs", len(layers))
	}
	if fi, err := os.Stat(filepath.Join(s.dir, "layers", layers[0].Name(), "bin", "busybox")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/busybox in the layer: %v %v", fi, err)
	}
	if l := s.List(); len(l) != 1 || l[0].ID != id {
		t.Errorf("List: %+v", l)
	}
	used, inodes, err := s.Usage()
	if err != nil || used < 1<<20 || inodes < 10 {
		t.Errorf("Usage: %d bytes, %d inodes, %v", used, inodes, err)
	}
}

func TestLoadMultiImageArchive(t *testing.T) {
	s := openStore(t)
	a := imageOf(t, []string{"a"}, layerOf(t, entry{name: "a", data: "a"}))
	b := imageOf(t, []string{"b"}, layerOf(t, entry{name: "b", data: "b"}))
	p := filepath.Join(t.TempDir(), "multi.tar")
	tags := map[name.Tag]v1.Image{}
	for ref, img := range map[string]v1.Image{"example.com/a:1": a, "example.com/a:latest": a, "localhost:5000/b:v2": b} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		tags[tag] = img
	}
	if err := tarball.MultiWriteToFile(p, tags); err != nil {
		t.Fatal(err)
	}
	imgs := loadFile(t, s, p)
	if len(imgs) != 2 {
		t.Fatalf("loaded %d images", len(imgs))
	}
	got, err := s.Get("example.com/a")
	if err != nil || got.ID != configID(t, a) {
		t.Fatalf("Get a: %v %v", got, err)
	}
	slices.Sort(got.RepoTags)
	if !slices.Equal(got.RepoTags, []string{"example.com/a:1", "example.com/a:latest"}) {
		t.Errorf("a tags %v", got.RepoTags)
	}
	if got, err := s.Get("localhost:5000/b:v2"); err != nil || got.ID != configID(t, b) {
		t.Errorf("Get b: %v %v", got, err)
	}
}

// tarDir writes the directory dir as a tar, gzip-compressed if zip.
func tarDir(t *testing.T, dir string, zip bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if zip {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func TestLoadOCILayout(t *testing.T) {
	s := openStore(t)
	a := imageOf(t, []string{"a"}, layerOf(t, entry{name: "a", data: "a"}))
	b := imageOf(t, []string{"b"}, layerOf(t, entry{name: "b", data: "b"}))
	arm := imageOf(t, []string{"arm"}, layerOf(t, entry{name: "arm", data: "arm"}))
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(a, layout.WithAnnotations(map[string]string{annotationContainerdName: "docker.io/library/a:v1", annotationRefName: "v1"})); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(b, layout.WithAnnotations(map[string]string{annotationRefName: "registry.example/b:2"})); err != nil {
		t.Fatal(err)
	}
	// A multi-platform index: only our platform's image is taken.
	multi := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: a, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	if err := p.AppendIndex(multi, layout.WithAnnotations(map[string]string{annotationRefName: "example.com/multi:1"})); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.Load(t.Context(), bytes.NewReader(tarDir(t, dir, true)))
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 2 {
		t.Errorf("loaded %d images, want a and b", len(imgs))
	}
	ga, err := s.Get("a:v1")
	if err != nil || ga.ID != configID(t, a) {
		t.Fatalf("Get a:v1: %v %v", ga, err)
	}
	if got, err := s.Get("example.com/multi:1"); err != nil || got.ID != ga.ID {
		t.Errorf("multi-platform entry: %v %v", got, err)
	}
	if got, err := s.Get("registry.example/b:2"); err != nil || got.ID != configID(t, b) {
		t.Errorf("Get b: %v %v", got, err)
	}
	digest, _ := a.Digest()
	if got, err := s.Get("a@" + digest.String()); err != nil || got.ID != ga.ID {
		t.Errorf("Get by digest: %v %v", got, err)
	}
	if _, err := s.Get(configID(t, arm)); !errors.Is(err, ErrNotFound) {
		t.Errorf("the arm64 image was stored: %v", err)
	}
}

func TestLoadRejectsOtherArchives(t *testing.T) {
	s := openStore(t)
	if _, err := s.Load(t.Context(), bytes.NewReader(tarOf(t, entry{name: "hello", data: "x"}))); err == nil {
		t.Error("a tar without manifest.json or index.json loaded")
	}
	if _, err := s.Load(t.Context(), strings.NewReader("not a tar")); err == nil {
		t.Error("garbage loaded")
	}
}

func TestPull(t *testing.T) {
	s := openStore(t)
	host := testimage.Registry(t)
	bb := testimage.Busybox(t)
	testimage.Push(t, host, "team/busybox:v1", bb)
	img, err := s.Pull(t.Context(), host+"/team/busybox:v1", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := bb.Digest()
	repo := host + "/team/busybox"
	if img.ID != configID(t, bb) || !slices.Equal(img.RepoTags, []string{repo + ":v1"}) ||
		!slices.Equal(img.RepoDigests, []string{repo + "@" + digest.String()}) {
		t.Errorf("pulled %+v", img)
	}
	for _, ref := range []string{repo + ":v1", repo + "@" + digest.String(), img.ID} {
		if got, err := s.Get(ref); err != nil || got.ID != img.ID {
			t.Errorf("Get(%q): %v %v", ref, got.ID, err)
		}
	}
	// By digest: a repo digest, no tag.
	testimage.Push(t, host, "other:v1", bb)
	byDigest, err := s.Pull(t.Context(), host+"/other@"+digest.String(), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(byDigest.RepoDigests, host+"/other@"+digest.String()) || slices.Contains(byDigest.RepoTags, host+"/other:v1") {
		t.Errorf("pulled by digest: %+v", byDigest)
	}
}

func TestPullNotFound(t *testing.T) {
	s := openStore(t)
	host := testimage.Registry(t)
	testimage.Push(t, host, "app:v1", imageOf(t, nil, layerOf(t, entry{name: "x"})))
	for _, ref := range []string{host + "/app:nope", host + "/missing:v1"} {
		_, err := s.Pull(t.Context(), ref, PullOptions{})
		if err == nil || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), "UNKNOWN") {
			t.Errorf("Pull(%s): %v; want not found with the registry's code", ref, err)
		}
	}
	if _, err := s.Pull(t.Context(), "UPPER/case", PullOptions{}); err == nil {
		t.Error("an invalid reference pulled")
	}
}

func TestPullIndexPicksPlatform(t *testing.T) {
	s := openStore(t)
	host := testimage.Registry(t)
	amd := imageOf(t, []string{"amd"}, layerOf(t, entry{name: "amd", data: "amd"}))
	arm := imageOf(t, []string{"arm"}, layerOf(t, entry{name: "arm", data: "arm"}))
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	), types.OCIImageIndex)
	ref, err := name.ParseReference(host+"/multi:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(t.Context(), host+"/multi:1", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	idxDigest, _ := idx.Digest()
	if img.ID != configID(t, amd) || !slices.Contains(img.RepoDigests, host+"/multi@"+idxDigest.String()) {
		t.Errorf("pulled %+v, want the amd64 image with the index's digest", img)
	}
}

func TestPullBasicAuth(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()
	img := imageOf(t, nil, layerOf(t, entry{name: "x"}))
	ref, _ := name.ParseReference(host+"/private:1", name.Insecure)
	if err := remote.Write(ref, img, remote.WithContext(t.Context()), remote.WithAuth(basic("alice", "secret"))); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	if _, err := s.Pull(t.Context(), host+"/private:1", PullOptions{}); err == nil {
		t.Error("anonymous pull of a private image worked")
	}
	if _, err := s.Pull(t.Context(), host+"/private:1", PullOptions{Auth: &Auth{Username: "alice", Password: "wrong"}}); err == nil {
		t.Error("pull with a wrong password worked")
	}
	if _, err := s.Pull(t.Context(), host+"/private:1", PullOptions{Auth: &Auth{Username: "alice", Password: "secret"}}); err != nil {
		t.Errorf("pull with credentials: %v", err)
	}
}

func TestHTTPGuard(t *testing.T) {
	g := httpGuard{base: http.DefaultTransport}
	req, _ := http.NewRequest(http.MethodGet, "http://10.1.2.3:5000/v2/", nil)
	if _, err := g.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "insecure") {
		t.Errorf("plain HTTP to a registry that is not insecure: %v", err)
	}
	for reg, want := range map[string]bool{"localhost:5000": true, "127.0.0.1:5000": true, "[::1]:5000": true,
		"localhost": true, "10.0.0.1:5000": false, "docker.io": false, "localhost.example.com": false} {
		if got := isLocalhost(reg); got != want {
			t.Errorf("isLocalhost(%s) = %v", reg, got)
		}
	}
}

func TestConcurrentPulls(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	host := testimage.Registry(t)
	img := testimage.HTTPServer(t)
	testimage.Push(t, host, "server:v1", img)
	// Two stores on one directory stand for two processes.
	var stores []*Store
	for range 2 {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := stores[i%2].Pull(t.Context(), host+"/server:v1", PullOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, s := range stores {
		l := s.List()
		if len(l) != 1 || l[0].ID != configID(t, img) {
			t.Errorf("List: %+v", l)
		}
		checkInvariants(t, s)
	}
	layers, _ := os.ReadDir(filepath.Join(dir, "layers"))
	if len(layers) != 2 {
		t.Errorf("%d layer dirs, want 2", len(layers))
	}
}

func TestRemoveAndGC(t *testing.T) {
	s := openStore(t)
	tmp := t.TempDir()
	bb := testimage.Busybox(t)
	srv := testimage.HTTPServer(t) // shares the busybox layer
	loadFile(t, s, testimage.WriteTarball(t, tmp, "busybox:1", bb))
	loadFile(t, s, testimage.WriteTarball(t, tmp, "server:1", srv))
	count := func(sub string) int {
		e, err := os.ReadDir(filepath.Join(s.dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		return len(e)
	}
	if n := count("layers"); n != 2 {
		t.Fatalf("%d layer dirs, want 2 (one shared)", n)
	}
	blobsBefore := count("blobs/sha256")
	if err := s.Remove("server:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("server:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove: %v", err)
	}
	if n := count("layers"); n != 1 {
		t.Errorf("%d layer dirs after removing server, want busybox's 1", n)
	}
	if n := count("blobs/sha256"); n != 3 || blobsBefore != 6 {
		t.Errorf("blobs: %d before, %d after; want 6 (shared busybox layer) and 3 (layer, config, manifest)", blobsBefore, n)
	}
	if _, err := s.Get("busybox:1"); err != nil {
		t.Errorf("busybox lost: %v", err)
	}
	if err := s.Remove(strings.TrimPrefix(configID(t, bb), "sha256:")[:10]); err != nil {
		t.Fatal(err)
	}
	if n, b := count("layers"), count("blobs/sha256"); n != 0 || b != 0 {
		t.Errorf("%d layers, %d blobs left", n, b)
	}
	if err := s.Remove("busybox:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: %v, want ErrNotFound", err)
	}
}

func TestTagMovesAndIndexIsShared(t *testing.T) {
	s := openStore(t)
	other, err := Open(s.dir) // another process's view
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	a := imageOf(t, []string{"a"}, layerOf(t, entry{name: "a", data: "a"}))
	b := imageOf(t, []string{"b"}, layerOf(t, entry{name: "b", data: "b"}))
	loadFile(t, s, testimage.WriteTarball(t, tmp, "app:v1", a))
	if got, err := other.Get("app:v1"); err != nil || got.ID != configID(t, a) {
		t.Fatalf("the other store does not see the load: %v %v", got, err)
	}
	loadFile(t, other, testimage.WriteTarball(t, filepath.Join(tmp), "app:v1", b))
	if got, err := s.Get("app:v1"); err != nil || got.ID != configID(t, b) {
		t.Errorf("app:v1 is %v %v, want b", got.ID, err)
	}
	if _, err := s.Get(configID(t, a)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a lost its only name but is still listed: %v", err)
	}
}

func TestLoadCanceled(t *testing.T) {
	s := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p := testimage.WriteTarball(t, t.TempDir(), "busybox", testimage.Busybox(t))
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := s.Load(ctx, f); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a canceled context: %v", err)
	}
	if l := s.List(); len(l) != 0 {
		t.Errorf("images after a canceled load: %v", l)
	}
}

// TestPullInsecureOption serves a registry on this machine's non-loopback address, where
// plain HTTP needs PullOptions.Insecure.
func TestPullInsecureOption(t *testing.T) {
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("no non-loopback IPv4 address on this machine")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	host := testimage.RegistryOn(t, l)
	img := imageOf(t, nil, layerOf(t, entry{name: "x"}))
	ref, _ := name.ParseReference(host+"/app:1", name.Insecure)
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	// HTTPS fails; plain HTTP is either not tried or refused by httpGuard (for private addresses).
	if _, err := s.Pull(t.Context(), host+"/app:1", PullOptions{}); err == nil {
		t.Errorf("plain-HTTP pull from %s without Insecure: %v", host, err)
	}
	var asked []string
	insecure := func(reg string) bool { asked = append(asked, reg); return reg == host }
	if _, err := s.Pull(t.Context(), host+"/app:1", PullOptions{Insecure: insecure}); err != nil {
		t.Errorf("pull with Insecure: %v", err)
	}
	if !slices.Equal(asked, []string{host}) {
		t.Errorf("Insecure was asked about %v, want [%s]", asked, host)
	}
}

// TestPullBearerToken: the registry sends clients to a token service (basic auth there),
// as Docker Hub and most registries do; go-containerregistry's transport does the exchange.
func TestPullBearerToken(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var tokenURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			if u, p, ok := r.BasicAuth(); !ok || u != "bob" || p != "pw" {
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"token":"t0ken","access_token":"t0ken"}`)
			return
		}
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+tokenURL+`",service="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"token required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tokenURL = srv.URL + "/token"
	host := srv.Listener.Addr().String()
	img := imageOf(t, nil, layerOf(t, entry{name: "x"}))
	ref, _ := name.ParseReference(host+"/private:1", name.Insecure)
	if err := remote.Write(ref, img, remote.WithContext(t.Context()), remote.WithAuth(basic("bob", "pw"))); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	if _, err := s.Pull(t.Context(), host+"/private:1", PullOptions{}); err == nil {
		t.Error("anonymous pull worked")
	}
	got, err := s.Pull(t.Context(), host+"/private:1", PullOptions{Auth: &Auth{Username: "bob", Password: "pw"}})
	if err != nil || got.ID != configID(t, img) {
		t.Errorf("pull with credentials: %v %v", got.ID, err)
	}
}

func TestOpenCleansLeftovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of an unpack leaves behind.
	if err := os.MkdirAll(filepath.Join(dir, "tmp", "layer-123", "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(s.tmpDir()); len(left) != 0 {
		t.Errorf("tmp/ still holds %v", left)
	}
	// While an import holds the store, its files are left alone.
	release, err := s.holdOffGC()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := os.Mkdir(filepath.Join(dir, "tmp", "layer-busy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp", "layer-busy")); err != nil {
		t.Errorf("Open removed the files of a running import: %v", err)
	}
	os.Remove(filepath.Join(dir, "tmp", "layer-busy"))
}
