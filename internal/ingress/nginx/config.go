// Package nginx turns the ingress controller's model into an nginx.conf (a pure
// function, Render), checks a candidate configuration with `nginx -t`, runs
// and reloads the nginx master process and confirms that a reload took
// (Process), detects nginx's Lua module (DetectLua) and talks to the control
// socket every rendered configuration listens on (Control): the id of the
// configuration being served, and, with Lua, the endpoints of every backend,
// replaced without a reload.
package nginx

import "path/filepath"

// Config is everything nginx.conf is rendered from. Paths are absolute.
type Config struct {
	// Prefix is the controller's nginx directory (pid file, logs, temp dirs).
	Prefix string
	// ListenAddress is the address the servers bind ("" means every address).
	ListenAddress string
	// HTTPPort and HTTPSPort are the ports nginx listens on.
	HTTPPort, HTTPSPort int
	// WorkerProcesses is nginx's worker_processes ("" means auto).
	WorkerProcesses string
	// Upstreams are the backends with at least one ready endpoint, by Name.
	Upstreams []Upstream
	// Default is the catch-all server: rules without a host and the default
	// backend; it answers 404 where nothing matches.
	Default Server
	// Servers are one per host, in the order they are rendered.
	Servers []Server
	// Lua, when set, loads nginx's Lua module and takes upstream members
	// from the endpoints sent to the control socket (BackendsText) instead
	// of server lines: an endpoint change then needs no reload. Without it,
	// Upstream.Servers are rendered and a change of them needs a reload.
	Lua *Lua
}

// Lua is how nginx loads its Lua module (see DetectLua).
type Lua struct {
	// Modules are the dynamic module files to load_module, in order (the
	// NDK, then the Lua module).
	Modules []string
}

// ControlSocket is the unix socket, under prefix, of the control server of
// every rendered configuration (the directory is 0700: only root reaches it).
func ControlSocket(prefix string) string { return filepath.Join(prefix, "run", "control.sock") }

// BackendsFile is where the controller keeps the endpoints last sent (the
// BackendsText format); nginx loads it into its shared dict when it starts
// or reloads.
func BackendsFile(prefix string) string { return filepath.Join(prefix, "conf", "backends") }

// Upstream is one (service, port) with its ready endpoints.
type Upstream struct {
	// Name is unique in a Config and made of [a-z0-9_.-].
	Name string
	// Servers are "ip:port" (IPv6 as "[ip]:port"), sorted. Without Lua
	// there is at least one; with Lua there may be none (the backend
	// answers 503 until endpoints are sent).
	Servers []string
}

// Server is one virtual server.
type Server struct {
	// Host is the server_name ("" for the catch-all server).
	Host string
	// TLS, when set, makes the server answer on the HTTPS port with this
	// certificate.
	TLS *TLS
	// Locations are rendered in this order.
	Locations []Location
}

// TLS names a certificate file (certificate chain followed by the key).
type TLS struct {
	// File holds the PEM certificate chain followed by the PEM private key.
	File string
	// Owner names who provided the certificate ("namespace/name" of an
	// Ingress), written as a comment so an nginx error can be traced to it.
	Owner string
}

// Match is how a location matches the request path.
type Match int

const (
	// MatchExact is `location = /p`.
	MatchExact Match = iota
	// MatchPrefix is `location ^~ /p` (a plain string prefix; the Ingress
	// Prefix type is built from an exact and a "/p/" location).
	MatchPrefix
)

// Location is one location block.
type Location struct {
	Match Match
	// Path is the location's path; it contains no whitespace, quotes, `;`,
	// `{`, `}` or `$`.
	Path string
	// Owner is "namespace/name" of the Ingress that defined it (a comment).
	Owner string
	// Comment says what it serves (e.g. "Prefix /api -> svc:80").
	Comment string
	// Status, when not zero, makes the location answer with this status and
	// no body from a backend (404 for nothing, 503 for no endpoints).
	Status int
	// Upstream is the Upstream.Name to proxy to when Status is zero.
	Upstream string
	// RedirectHTTPS sends plain-HTTP requests to HTTPS with a 308.
	RedirectHTTPS bool
	// Rewrites rewrite the URI before proxying; the first that matches wins.
	Rewrites []Rewrite
	// BodySize, ConnectTimeout, ReadTimeout, SendTimeout are nginx values
	// ("" leaves nginx's default).
	BodySize, ConnectTimeout, ReadTimeout, SendTimeout string
}

// Rewrite is one `rewrite Regex Replacement break;`.
type Rewrite struct {
	// Regex matches the whole URI; Replacement may use its captures ($1).
	Regex, Replacement string
}
