package nginx

import (
	"crypto/sha256"
	_ "embed" // the balancer's Lua source
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// luaSource is the Lua module kubette loads into nginx (see kubette.lua).
//
//go:embed kubette.lua
var luaSource string

// idPlaceholder stands for the configuration id while the configuration is
// hashed; it is as long as an id.
const idPlaceholder = "@@config-id@@@@@"

// backendsDict is the lua_shared_dict holding the endpoints.
const backendsDict = "kubette_backends"

// backendsDictSize bounds the endpoints nginx can hold (about 40 bytes per
// endpoint: 32 MiB is several hundred thousand).
const backendsDictSize = "32m"

// maxBackendsBody is the largest endpoint set the control socket takes; the
// body is kept in memory (workers may not write the temp directories).
const maxBackendsBody = "32m"

// Render returns nginx.conf for c. It is a pure function of c.
//
// The master runs in the foreground (the Process owns it); logs, the pid file
// and the temp directories live under c.Prefix. Every server and location
// carries an "# owner" comment naming the Ingress it came from, so that a
// line number in an `nginx -t` error can be traced back (see OwnerAt). The
// last server listens on ControlSocket(c.Prefix) and serves the
// configuration's id (ConfigID: a hash of the rest of it) at /kubette/config,
// so that a reload can be confirmed; with c.Lua it also takes the endpoints
// at /kubette/backends.
func Render(c Config) []byte {
	conf := render(c)
	sum := sha256.Sum256(conf)
	return []byte(strings.ReplaceAll(string(conf), idPlaceholder, hex.EncodeToString(sum[:8])))
}

var configIDLine = regexp.MustCompile(`(?m)^\s*# config ([0-9a-f]{16})$`)

// ConfigID returns the id of a rendered configuration ("" if it has none):
// what its control server answers at /kubette/config.
func ConfigID(conf []byte) string {
	if m := configIDLine.FindSubmatch(conf); m != nil {
		return string(m[1])
	}
	return ""
}

func render(c Config) []byte {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("    ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	workers := c.WorkerProcesses
	if workers == "" {
		workers = "auto"
	}
	w(0, "# Written by kubette ingress; do not edit.")
	if c.Lua != nil {
		for _, m := range c.Lua.Modules {
			w(0, "load_module %s;", m)
		}
	}
	w(0, "daemon off;")
	w(0, "worker_processes %s;", workers)
	w(0, "pid %s/nginx.pid;", c.Prefix)
	w(0, "error_log %s/logs/error.log notice;", c.Prefix)
	w(0, "worker_shutdown_timeout 10s;")
	w(0, "")
	w(0, "events {")
	w(1, "worker_connections 4096;")
	w(0, "}")
	w(0, "")
	w(0, "http {")
	w(1, "access_log %s/logs/access.log;", c.Prefix)
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		w(1, "%s_temp_path %s/tmp/%s;", t, c.Prefix, t)
	}
	w(1, "default_type application/octet-stream;")
	w(1, "server_tokens off;")
	w(1, "sendfile on;")
	w(1, "keepalive_timeout 75s;")
	w(1, "server_names_hash_max_size 16384;")
	w(1, "server_names_hash_bucket_size 256;")
	w(1, "proxy_http_version 1.1;")
	w(1, "proxy_set_header Connection \"\";")
	w(1, "proxy_set_header Host $host;")
	w(1, "proxy_set_header X-Real-IP $remote_addr;")
	w(1, "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;")
	w(1, "proxy_set_header X-Forwarded-Host $host;")
	w(1, "proxy_set_header X-Forwarded-Proto $scheme;")
	w(1, "proxy_next_upstream error timeout;")
	// Workers run as nginx's unprivileged user and may not reach the temp
	// directories under the controller's data directory: bodies are streamed,
	// never buffered to disk.
	w(1, "proxy_request_buffering off;")
	w(1, "proxy_max_temp_file_size 0;")
	w(1, "ssl_protocols TLSv1.2 TLSv1.3;")
	w(1, "ssl_session_cache shared:SSL:10m;")
	if c.Lua != nil {
		w(0, "")
		w(1, "# Endpoints: kept in %s, set through the control socket.", backendsDict)
		w(1, "lua_shared_dict %s %s;", backendsDict, backendsDictSize)
		w(1, "init_by_lua_block {")
		w(2, "package.loaded.kubette = (function()")
		for _, l := range strings.Split(strings.TrimRight(luaSource, "\n"), "\n") {
			if l == "" {
				b.WriteByte('\n')
				continue
			}
			w(3, "%s", l)
		}
		w(2, "end)()")
		w(2, "require(\"kubette\").load_file(%s)", strconv.Quote(BackendsFile(c.Prefix)))
		w(1, "}")
		w(1, "init_worker_by_lua_block {")
		w(2, "math.randomseed(ngx.now() * 1000 + ngx.worker.pid())")
		w(1, "}")
	}
	for _, u := range c.Upstreams {
		w(0, "")
		w(1, "upstream %s {", u.Name)
		if c.Lua != nil {
			w(2, "server 0.0.0.1 max_fails=0; # placeholder: balancer_by_lua picks the peer")
			w(2, "balancer_by_lua_block {")
			w(3, "require(\"kubette\").balance(\"%s\")", u.Name)
			w(2, "}")
		} else {
			for _, s := range u.Servers {
				w(2, "server %s max_fails=0;", s)
			}
		}
		w(2, "keepalive 32;")
		w(1, "}")
	}
	w(0, "")
	renderServer(w, c, c.Default, true)
	for _, s := range c.Servers {
		w(0, "")
		renderServer(w, c, s, false)
	}
	w(0, "")
	renderControl(w, c)
	w(0, "}")
	return []byte(b.String())
}

// renderControl writes the control server: on a unix socket in a 0700
// directory, so only root (the controller) reaches it.
func renderControl(w func(int, string, ...any), c Config) {
	w(1, "server {")
	w(2, "# owner -")
	w(2, "# control: the id of this configuration; with Lua, the endpoints")
	w(2, "# config %s", idPlaceholder)
	w(2, "listen unix:%s;", ControlSocket(c.Prefix))
	w(2, "access_log off;")
	w(0, "")
	w(2, "location = /kubette/config {")
	w(3, "return 200 \"%s\\n\";", idPlaceholder)
	w(2, "}")
	if c.Lua != nil {
		w(0, "")
		w(2, "location = /kubette/backends {")
		w(3, "client_max_body_size %s;", maxBackendsBody)
		w(3, "client_body_buffer_size %s;", maxBackendsBody)
		w(3, "content_by_lua_block {")
		w(4, "require(\"kubette\").serve_backends()")
		w(3, "}")
		w(2, "}")
		w(0, "")
		w(2, "location = /kubette/backend {")
		w(3, "content_by_lua_block {")
		w(4, "require(\"kubette\").serve_backend()")
		w(3, "}")
		w(2, "}")
	}
	w(0, "")
	w(2, "location / {")
	w(3, "return 404;")
	w(2, "}")
	w(1, "}")
}

func listen(c Config, port int) string {
	if c.ListenAddress == "" {
		return fmt.Sprint(port)
	}
	if strings.Contains(c.ListenAddress, ":") {
		return fmt.Sprintf("[%s]:%d", c.ListenAddress, port)
	}
	return fmt.Sprintf("%s:%d", c.ListenAddress, port)
}

func renderServer(w func(int, string, ...any), c Config, s Server, catchAll bool) {
	w(1, "server {")
	w(2, "# owner -")
	if catchAll {
		w(2, "listen %s default_server;", listen(c, c.HTTPPort))
		w(2, "listen %s ssl default_server;", listen(c, c.HTTPSPort))
		w(2, "server_name _;")
		w(2, "ssl_reject_handshake on;")
	} else {
		w(2, "listen %s;", listen(c, c.HTTPPort))
		if s.TLS != nil {
			w(2, "listen %s ssl;", listen(c, c.HTTPSPort))
		}
		w(2, "server_name %s;", s.Host)
	}
	if s.TLS != nil {
		w(2, "# owner %s", s.TLS.Owner)
		w(2, "ssl_certificate %s;", s.TLS.File)
		w(2, "ssl_certificate_key %s;", s.TLS.File)
	}
	hasRoot := false
	for _, l := range s.Locations {
		if l.Match == MatchPrefix && l.Path == "/" {
			hasRoot = true
		}
		w(0, "")
		renderLocation(w, c, l)
	}
	if !hasRoot {
		w(0, "")
		w(2, "# owner -")
		w(2, "location / {")
		w(3, "return 404;")
		w(2, "}")
	}
	w(1, "}")
}

func renderLocation(w func(int, string, ...any), c Config, l Location) {
	w(2, "# owner %s", l.Owner)
	if l.Comment != "" {
		w(2, "# %s", l.Comment)
	}
	switch l.Match {
	case MatchExact:
		w(2, "location = %s {", l.Path)
	default:
		if l.Path == "/" {
			w(2, "location / {")
		} else {
			w(2, "location ^~ %s {", l.Path)
		}
	}
	if l.RedirectHTTPS {
		target := "https://$host$request_uri"
		if c.HTTPSPort != 443 {
			target = fmt.Sprintf("https://$host:%d$request_uri", c.HTTPSPort)
		}
		w(3, "if ($scheme = http) {")
		w(4, "return 308 %s;", target)
		w(3, "}")
	}
	if l.BodySize != "" {
		w(3, "client_max_body_size %s;", l.BodySize)
	}
	if l.Status != 0 {
		w(3, "return %d;", l.Status)
		w(2, "}")
		return
	}
	if l.ConnectTimeout != "" {
		w(3, "proxy_connect_timeout %s;", l.ConnectTimeout)
	}
	if l.ReadTimeout != "" {
		w(3, "proxy_read_timeout %s;", l.ReadTimeout)
	}
	if l.SendTimeout != "" {
		w(3, "proxy_send_timeout %s;", l.SendTimeout)
	}
	for _, r := range l.Rewrites {
		w(3, "rewrite \"%s\" \"%s\" break;", r.Regex, r.Replacement)
	}
	if c.Lua != nil {
		w(3, "access_by_lua_block {")
		w(4, "require(\"kubette\").access(\"%s\")", l.Upstream)
		w(3, "}")
	}
	w(3, "proxy_pass http://%s;", l.Upstream)
	w(2, "}")
}

// OwnerAt returns the owner named by the nearest "# owner" comment at or
// above line (1-based) of a rendered config: the Ingress ("namespace/name")
// whose server or location holds that line, "-" for the controller's own
// parts, "" when the line is out of range.
func OwnerAt(conf []byte, line int) string {
	lines := strings.Split(string(conf), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	for i := line - 1; i >= 0; i-- {
		if o, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "# owner "); ok {
			return o
		}
	}
	return ""
}

// LineOf returns the 1-based number of the first line of conf containing s,
// or 0.
func LineOf(conf []byte, s string) int {
	for i, l := range strings.Split(string(conf), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	return 0
}
