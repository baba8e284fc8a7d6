package nginx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultModuleDirs are where DetectLua looks for the NDK and Lua modules by
// default (Debian's libnginx-mod-http-ndk and libnginx-mod-http-lua install
// into the first).
func DefaultModuleDirs() []string {
	return []string{"/usr/lib/nginx/modules", "/usr/share/nginx/modules", "/usr/local/nginx/modules", "/etc/nginx/modules"}
}

// Module file names, in load order.
const (
	ndkModule = "ndk_http_module.so"
	luaModule = "ngx_http_lua_module.so"
)

// DetectLua finds nginx's Lua module in moduleDirs (nil: DefaultModuleDirs)
// and proves that it works with binary:
// it starts a throwaway nginx in dir (an empty directory it may use) that
// loads the modules, runs kubette's Lua code (which needs lua-resty-core) and
// answers a request on a unix socket, then stops it. It returns the Lua
// settings for Config.Lua, or an error saying why Lua cannot be used.
//
// `nginx -t` alone is not enough: it neither creates the Lua VM nor loads
// resty.core, without which the real start fails.
func DetectLua(ctx context.Context, binary, dir string, moduleDirs []string) (*Lua, error) {
	if moduleDirs == nil {
		moduleDirs = DefaultModuleDirs()
	}
	var lua *Lua
	for _, d := range moduleDirs {
		ndk, lm := filepath.Join(d, ndkModule), filepath.Join(d, luaModule)
		if fileExists(lm) {
			lua = &Lua{Modules: []string{lm}}
			if fileExists(ndk) {
				lua.Modules = []string{ndk, lm}
			}
			break
		}
	}
	if lua == nil {
		return nil, fmt.Errorf("no %s in %s (Debian: libnginx-mod-http-lua)", luaModule, strings.Join(moduleDirs, ", "))
	}
	for _, d := range []string{"conf", "logs", "run", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("lua probe: %w", err)
		}
	}
	conf := filepath.Join(dir, "conf", "nginx.conf")
	if err := os.WriteFile(conf, probeConfig(dir, lua), 0o644); err != nil {
		return nil, fmt.Errorf("lua probe: %w", err)
	}
	if err := Check(ctx, binary, dir, conf); err != nil {
		return nil, fmt.Errorf("lua probe: %w", err)
	}
	if err := runProbe(ctx, binary, dir, conf); err != nil {
		return nil, err
	}
	return lua, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// probeConfig is a Config with Lua and nothing listening but the control
// socket, plus a location that proves the Lua code runs in a worker.
func probeConfig(dir string, lua *Lua) []byte {
	conf := string(Render(Config{Prefix: dir, HTTPPort: 1, HTTPSPort: 1, WorkerProcesses: "1", Lua: lua,
		Upstreams: []Upstream{{Name: "probe", Servers: []string{"127.0.0.1:1"}}}}))
	// Keep only the control server: drop the catch-all server, which
	// listens on TCP ports.
	start := strings.Index(conf, "\n    server {\n        # owner -\n        listen ")
	end := strings.Index(conf, "\n    server {\n        # owner -\n        # control:")
	if start >= 0 && end > start {
		conf = conf[:start] + conf[end:]
	}
	return []byte(strings.Replace(conf, "        location = /kubette/config {",
		"        location = /kubette/probe {\n            content_by_lua_block {\n"+
			"                local k = require(\"kubette\")\n"+
			"                assert(k.load(\"probe 127.0.0.1:1\") == 1)\n"+
			"                ngx.say(\"lua ok \", ngx.config.ngx_lua_version)\n"+
			"            }\n        }\n\n        location = /kubette/config {", 1))
}

// runProbe starts nginx on the probe configuration, asks the probe location
// and stops nginx.
func runProbe(ctx context.Context, binary, dir, conf string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sock := ControlSocket(dir)
	_ = os.Remove(sock)
	var stderr bytes.Buffer
	cmd := exec.Command(binary, "-p", dir+"/", "-e", "stderr", "-c", conf)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("lua probe: start nginx: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	}()
	ctl := Control{Socket: sock}
	for {
		body, err := ctl.get(ctx, "/kubette/probe")
		if err == nil {
			if !strings.HasPrefix(body, "lua ok") {
				return fmt.Errorf("lua probe: nginx answered %q", body)
			}
			return nil
		}
		var se *StatusError
		if errors.As(err, &se) {
			return fmt.Errorf("lua probe: %w: %s", err, lastLines(stderr.String(), 3))
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("lua probe: nginx exited (%v): %s", err, lastLines(stderr.String(), 3))
		case <-ctx.Done():
			return fmt.Errorf("lua probe: nginx did not answer: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// BackendsText is what the control socket takes at /kubette/backends (and
// the backends file holds): one line per upstream, its name then its
// endpoints, separated by spaces. It is a pure function of upstreams.
func BackendsText(upstreams []Upstream) []byte {
	var b bytes.Buffer
	for _, u := range upstreams {
		b.WriteString(u.Name)
		for _, s := range u.Servers {
			b.WriteByte(' ')
			b.WriteString(s)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}
