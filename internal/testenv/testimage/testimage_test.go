package testimage

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubette/kubette/internal/testenv/poll"
)

// entries lists the files of img's flattened filesystem by name, with their headers.
func entries(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	return out
}

func TestBusybox(t *testing.T) {
	img := Busybox(t)
	files := entries(t, img)
	for _, want := range []string{"bin/busybox", "etc/passwd", "etc/group", "tmp"} {
		if files[want] == nil {
			t.Errorf("busybox image lacks %s", want)
		}
	}
	for _, a := range Applets() {
		h := files["bin/"+a]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s: want a symlink to busybox, got %+v", a, h)
		}
	}
	if m := files["tmp"].Mode; m != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", m)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cf.Config.Cmd) != "[sh]" || cf.OS != "linux" {
		t.Errorf("config: cmd %v os %s", cf.Config.Cmd, cf.OS)
	}
	// Deterministic: building it twice gives the same image.
	d1, _ := img.Digest()
	d2, _ := Busybox(t).Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s vs %s", d1, d2)
	}
}

func TestHTTPServerImage(t *testing.T) {
	img := HTTPServer(t)
	files := entries(t, img)
	if files["server"] == nil || files["bin/sh"] == nil {
		t.Fatalf("server image lacks /server or /bin/sh")
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cf.Config.Entrypoint) != "[/server]" {
		t.Errorf("entrypoint %v", cf.Config.Entrypoint)
	}
}

// TestHTTPServerProgram runs the compiled server on the host and checks every endpoint.
func TestHTTPServerProgram(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(bin, serverBinary(t), 0o755); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(poll.FreePort(t))
	cmd := exec.Command(bin)
	cmd.Env = []string{"PORT=" + port, "POD_NAME=web-0", "TERM_DELAY=0"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	base := "http://127.0.0.1:" + port
	get := func(path string) (int, string) {
		t.Helper()
		var resp *http.Response
		poll.Until(t, "GET "+path, func() (err error) {
			resp, err = http.Get(base + path)
			return err
		})
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	host, _ := os.Hostname()
	if code, body := get("/hello"); code != 200 || body != fmt.Sprintf("hostname=%s pod=web-0 path=/hello\n", host) {
		t.Errorf("GET /hello: %d %q", code, body)
	}
	if code, body := get("/env"); code != 200 || !strings.Contains(body, "POD_NAME=web-0") {
		t.Errorf("GET /env: %d %q", code, body)
	}
	if code, body := get("/alloc?mb=2"); code != 200 || !strings.Contains(body, "holding 2 MiB") {
		t.Errorf("GET /alloc: %d %q", code, body)
	}
	// /healthz looks at the real /tmp/unhealthy; only check it when that file is absent.
	if _, err := os.Stat("/tmp/unhealthy"); os.IsNotExist(err) {
		if code, _ := get("/healthz"); code != 200 {
			t.Errorf("GET /healthz: %d", code)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range lines {
		out = append(out, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("server exit: %v", err)
	}
	all := strings.Join(out, "\n")
	if !strings.Contains(all, "GET /hello") || !strings.HasSuffix(all, "received SIGTERM") {
		t.Errorf("stdout:\n%s", all)
	}
}

func TestRegistryPush(t *testing.T) {
	host := Registry(t)
	img := Busybox(t)
	Push(t, host, "team/busybox:v1", img)
	ref, err := name.ParseReference(host+"/team/busybox:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("pulled %s, pushed %s", d, want)
	}
}

func TestWriteTarball(t *testing.T) {
	img := Busybox(t)
	p := WriteTarball(t, t.TempDir(), "example.com/busybox:1", img)
	tag, _ := name.NewTag("example.com/busybox:1")
	got, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if c, _ := got.ConfigName(); c != want {
		t.Errorf("tarball config %s, want %s", c, want)
	}
}
