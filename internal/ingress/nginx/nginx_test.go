package nginx

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/poll"
)

func TestParseCheckOutput(t *testing.T) {
	out := "2026/11/30 01:07:35 [emerg] 23192#23192: \"client_max_body_size\" directive invalid value in /d/conf/nginx.conf.new:42\n" +
		"nginx: configuration file /d/conf/nginx.conf.new test failed\n"
	e := parseCheckOutput(out)
	if e.Message != `"client_max_body_size" directive invalid value in /d/conf/nginx.conf.new:42` || e.File != "/d/conf/nginx.conf.new" || e.Line != 42 {
		t.Fatalf("got %+v", e)
	}
	e = parseCheckOutput("nginx: [emerg] cannot load certificate \"/d/certs/x.pem\": PEM_read_bio_X509_AUX() failed\n")
	if !strings.HasPrefix(e.Message, "cannot load certificate") || e.Line != 0 {
		t.Fatalf("got %+v", e)
	}
}

func TestOwnerAt(t *testing.T) {
	conf := Render(Config{Prefix: "/p", HTTPPort: 80, HTTPSPort: 443, Servers: []Server{{
		Host: "a.example", TLS: &TLS{File: "/p/certs/c.pem", Owner: "ns/tls"},
		Locations: []Location{{Match: MatchPrefix, Path: "/x", Owner: "ns/one", Status: 503, BodySize: "1m"}},
	}}})
	if got := OwnerAt(conf, LineOf(conf, "client_max_body_size 1m")); got != "ns/one" {
		t.Errorf("owner of the location's line: %q", got)
	}
	if got := OwnerAt(conf, LineOf(conf, "ssl_certificate_key /p/certs/c.pem")); got != "ns/tls" {
		t.Errorf("owner of the certificate line: %q", got)
	}
	if got := OwnerAt(conf, LineOf(conf, "server_name a.example")); got != "-" {
		t.Errorf("owner of server_name: %q", got)
	}
	if got := OwnerAt(conf, 0); got != "" {
		t.Errorf("owner of line 0: %q", got)
	}
}

// TestProcess runs the real nginx: it answers, reloads, is restarted after a
// SIGKILL (its orphaned workers killed so the port is free again) and stops
// with the context.
func TestProcess(t *testing.T) {
	bin := needs.Binary(t, "nginx", "nginx")
	needs.Root(t)
	dir := t.TempDir()
	for _, d := range []string{"conf", "logs", "tmp", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port, tlsPort := poll.FreePort(t), poll.FreePort(t)
	conf := filepath.Join(dir, "conf", "nginx.conf")
	write := func(status int) {
		c := Config{Prefix: dir, ListenAddress: "127.0.0.1", HTTPPort: port, HTTPSPort: tlsPort, WorkerProcesses: "1",
			Servers: []Server{{Host: "h.example", Locations: []Location{{Match: MatchPrefix, Path: "/", Owner: "t/t", Status: status}}}}}
		if err := os.WriteFile(conf, Render(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Check(context.Background(), bin, dir, conf); err != nil {
			t.Fatal(err)
		}
	}
	status := func() (int, error) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		req.Host = "h.example"
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	expect := func(code int) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("status %d", code), func() error {
			c, err := status()
			if err == nil && c != code {
				err = fmt.Errorf("got %d", c)
			}
			return err
		})
	}
	write(503)
	p := &Process{Binary: bin, Prefix: dir, Conf: conf, Control: ControlSocket(dir), MinRestartDelay: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	expect(503)
	write(418)
	poll.Until(t, "a running master", func() error {
		if ok, err := p.Reload(); !ok || err != nil {
			return fmt.Errorf("reload: %v %v", ok, err)
		}
		return nil
	})
	expect(418)
	pid := p.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "restarted", func() error {
		if q := p.Pid(); q == 0 || q == pid {
			return fmt.Errorf("pid %d", q)
		}
		return nil
	})
	write(451)
	if _, err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	expect(451)
	if p.Starts() < 2 {
		t.Errorf("starts: %d, want at least 2", p.Starts())
	}
	last := p.Pid()
	cancel()
	wg.Wait()
	if err := syscall.Kill(-last, 0); err == nil {
		t.Errorf("nginx process group %d still alive after Run returned", last)
	}
	if _, err := status(); err == nil {
		t.Errorf("nginx still answers after Run returned")
	}
}
