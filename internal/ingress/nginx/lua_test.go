package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

func TestRenderLua(t *testing.T) {
	c := Config{Prefix: "/p", HTTPPort: 80, HTTPSPort: 443,
		Upstreams: []Upstream{{Name: "ns_a_80", Servers: []string{"10.1.0.1:8080", "10.1.0.2:8080"}}, {Name: "ns_b_80"}},
		Servers:   []Server{{Host: "a.example", Locations: []Location{{Match: MatchPrefix, Path: "/", Owner: "ns/a", Upstream: "ns_a_80"}}}}}
	plain := Render(c)
	if !strings.Contains(string(plain), "server 10.1.0.1:8080 max_fails=0;") || strings.Contains(string(plain), "lua") {
		t.Errorf("without Lua the endpoints are server lines and nothing is Lua:\n%s", plain)
	}
	c.Lua = &Lua{Modules: []string{"/m/ndk.so", "/m/lua.so"}}
	lua := Render(c)
	for _, want := range []string{
		"load_module /m/ndk.so;\nload_module /m/lua.so;\ndaemon off;",
		"lua_shared_dict kubette_backends 32m;",
		`require("kubette").load_file("/p/conf/backends")`,
		"upstream ns_b_80 {\n        server 0.0.0.1 max_fails=0;",
		`require("kubette").balance("ns_a_80")`,
		`require("kubette").access("ns_a_80")`,
		"listen unix:/p/run/control.sock;",
		`require("kubette").serve_backends()`,
	} {
		if !strings.Contains(string(lua), want) {
			t.Errorf("Lua configuration lacks %q", want)
		}
	}
	if strings.Contains(string(lua), "10.1.0.1") {
		t.Errorf("Lua configuration names an endpoint")
	}
	// Endpoints are not part of a Lua configuration: changing them renders
	// the same bytes (no reload), and BackendsText carries them.
	c.Upstreams[0].Servers = []string{"10.1.0.9:8080"}
	if again := Render(c); string(again) != string(lua) {
		t.Errorf("an endpoint change changed the Lua configuration")
	}
	if got, want := string(BackendsText(c.Upstreams)), "ns_a_80 10.1.0.9:8080\nns_b_80\n"; got != want {
		t.Errorf("BackendsText = %q, want %q", got, want)
	}
	id, id2 := ConfigID(lua), ConfigID(plain)
	if len(id) != 16 || len(id2) != 16 || id == id2 {
		t.Errorf("config ids %q and %q", id, id2)
	}
	if !strings.Contains(string(lua), "return 200 \""+id+"\\n\";") {
		t.Errorf("the control server does not serve id %s", id)
	}
	if strings.Contains(string(lua), idPlaceholder) {
		t.Errorf("placeholder left in the configuration")
	}
}

// needsLua skips (fails in CI) when nginx's Lua module does not work here.
func needsLua(t *testing.T, bin string) *Lua {
	t.Helper()
	lua, err := DetectLua(context.Background(), bin, t.TempDir(), nil)
	if err != nil {
		if needs.InCI() {
			t.Fatalf("nginx Lua module (Debian libnginx-mod-http-lua): %v", err)
		}
		t.Skipf("nginx Lua module: %v", err)
	}
	return lua
}

func TestDetectLuaWithoutModule(t *testing.T) {
	bin := needs.Binary(t, "nginx", "nginx")
	if _, err := DetectLua(context.Background(), bin, t.TempDir(), []string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "libnginx-mod-http-lua") {
		t.Fatalf("DetectLua without a module: %v", err)
	}
	// A module file that is not one: nginx refuses it.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, luaModule), []byte("not a module"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := DetectLua(context.Background(), bin, t.TempDir(), []string{bad}); err == nil {
		t.Fatal("DetectLua accepted a broken module")
	}
}

func localBackend(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// startNginx writes c and runs a Process on it until the test ends.
func startNginx(t *testing.T, bin string, c Config) (*Process, string) {
	t.Helper()
	for _, d := range []string{"conf", "logs", "tmp", "run"} {
		if err := os.MkdirAll(filepath.Join(c.Prefix, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(c.Prefix, "conf", "nginx.conf")
	if err := os.WriteFile(conf, Render(c), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), bin, c.Prefix, conf); err != nil {
		t.Fatal(err)
	}
	p := &Process{Binary: bin, Prefix: c.Prefix, Conf: conf, Control: ControlSocket(c.Prefix), MinRestartDelay: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	poll.Until(t, "control socket answers", func() error {
		id, err := (Control{Socket: p.Control}).ConfigID(context.Background())
		if err == nil && id != ConfigID(Render(c)) {
			err = fmt.Errorf("id %q", id)
		}
		return err
	})
	return p, conf
}

func get(port int, host string) (int, string, error) {
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	req.Host = host
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestLuaEndpoints runs the real nginx with the Lua balancer: endpoints sent
// to the control socket are served without a reload, round robin; none
// answers 503; an endpoint that refuses connections is skipped (retry on
// the next peer); a restarted master loads the backends file.
func TestLuaEndpoints(t *testing.T) {
	bin := needs.Binary(t, "nginx", "nginx")
	needs.Root(t)
	lua := needsLua(t, bin)
	dir := t.TempDir()
	port := poll.FreePort(t)
	c := Config{Prefix: dir, ListenAddress: "127.0.0.1", HTTPPort: port, HTTPSPort: poll.FreePort(t), WorkerProcesses: "2", Lua: lua,
		Upstreams: []Upstream{{Name: "t_app_80"}},
		Servers:   []Server{{Host: "app.example", Locations: []Location{{Match: MatchPrefix, Path: "/", Owner: "t/app", Upstream: "t_app_80"}}}}}
	p, _ := startNginx(t, bin, c)
	ctl := Control{Socket: p.Control}
	ctx := context.Background()
	expect := func(code int, body string) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("answer %d %q", code, body), func() error {
			c, b, err := get(port, "app.example")
			if err == nil && (c != code || code == 200 && b != body) {
				err = fmt.Errorf("got %d %q", c, b)
			}
			return err
		})
	}
	expect(503, "")
	one, two := localBackend(t, "one"), localBackend(t, "two")
	put := func(text string, want int) {
		t.Helper()
		if err := os.WriteFile(BackendsFile(dir), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		n, err := ctl.PutBackends(ctx, []byte(text))
		if err != nil || n != want {
			t.Fatalf("PutBackends: %d %v, want %d", n, err, want)
		}
	}
	pid := p.Pid()
	put("t_app_80 "+one+"\nother_x_1 127.0.0.1:9\n", 2)
	expect(200, "one")
	if got, err := ctl.Backend(ctx, "t_app_80"); err != nil || got != one {
		t.Errorf("Backend: %q %v", got, err)
	}
	put("t_app_80 "+one+" "+two+"\n", 1)
	if _, err := ctl.Backend(ctx, "other_x_1"); err == nil {
		t.Errorf("a backend missing from the set is still held")
	}
	poll.Until(t, "round robin over both", func() error {
		seen := map[string]int{}
		for range 20 {
			_, b, err := get(port, "app.example")
			if err != nil {
				return err
			}
			seen[b]++
		}
		if seen["one"] == 0 || seen["two"] == 0 {
			return fmt.Errorf("answered by %v", seen)
		}
		return nil
	})
	// A peer that refuses connections: the request goes on to the next.
	closed := poll.FreePort(t)
	put(fmt.Sprintf("t_app_80 127.0.0.1:%d %s\n", closed, two), 1)
	for range 10 {
		if c, b, err := get(port, "app.example"); err != nil || c != 200 || b != "two" {
			t.Fatalf("with a refusing peer: %d %q %v", c, b, err)
		}
	}
	put("t_app_80\n", 1)
	expect(503, "")
	put("t_app_80 "+two+"\n", 1)
	expect(200, "two")
	if p.Pid() != pid || p.Starts() != 1 {
		t.Errorf("endpoint changes restarted nginx: pid %d -> %d, %d starts", pid, p.Pid(), p.Starts())
	}
	// A killed master's successor loads the backends file at start.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "restarted", func() error {
		if q := p.Pid(); q == 0 || q == pid {
			return fmt.Errorf("pid %d", q)
		}
		return nil
	})
	expect(200, "two")
}

// TestReloadFailureDetected makes a configuration that `nginx -t` accepts
// but a reload cannot apply (a listen port another process holds: -t does
// not bind) and checks that ReloadConfirmed reports it while the old
// configuration keeps serving, then that the reload takes once the port is
// free.
func TestReloadFailureDetected(t *testing.T) {
	bin := needs.Binary(t, "nginx", "nginx")
	needs.Root(t)
	dir := t.TempDir()
	port := poll.FreePort(t)
	c := Config{Prefix: dir, ListenAddress: "127.0.0.1", HTTPPort: port, HTTPSPort: poll.FreePort(t), WorkerProcesses: "1",
		Servers: []Server{{Host: "h.example", Locations: []Location{{Match: MatchPrefix, Path: "/", Owner: "t/t", Status: 418}}}}}
	p, conf := startNginx(t, bin, c)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c2 := c
	c2.HTTPSPort = taken.Addr().(*net.TCPAddr).Port
	c2.Servers = []Server{{Host: "h.example", Locations: []Location{{Match: MatchPrefix, Path: "/", Owner: "t/t", Status: 451}}}}
	next := Render(c2)
	if err := os.WriteFile(conf, next, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), bin, dir, conf); err != nil {
		t.Fatalf("nginx -t should accept the configuration: %v", err)
	}
	err = p.ReloadConfirmed(context.Background(), ConfigID(next), 2*time.Minute)
	var re *ReloadError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "Address already in use") {
		t.Fatalf("ReloadConfirmed: %v, want a ReloadError about the taken port", err)
	}
	if code, _, err := get(port, "h.example"); err != nil || code != 418 {
		t.Fatalf("the old configuration should still serve: %d %v", code, err)
	}
	// Once nginx gave up binding (it retries for a few seconds), free the
	// port: the same configuration now reloads.
	poll.Until(t, "nginx gave up the reload", func() error {
		if logLineAfter(p.ErrorLog(), 0, "still could not bind") == "" {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	taken.Close()
	if err := p.ReloadConfirmed(context.Background(), ConfigID(next), 2*time.Minute); err != nil {
		t.Fatalf("reload after the port was freed: %v", err)
	}
	// Old workers may still accept a few connections while they stop.
	poll.Until(t, "the new configuration serves", func() error {
		code, _, err := get(port, "h.example")
		if err == nil && code != 451 {
			err = fmt.Errorf("got %d", code)
		}
		return err
	})
}
