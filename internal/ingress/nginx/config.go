// Package nginx turns the ingress controller's model into an nginx.conf (a pure
// function, Render), checks a candidate configuration with `nginx -t`, and runs
// and reloads the nginx master process (Process).
package nginx

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
}

// Upstream is one (service, port) with its ready endpoints.
type Upstream struct {
	// Name is unique in a Config and made of [a-z0-9_.-].
	Name string
	// Servers are "ip:port" (IPv6 as "[ip]:port"), sorted.
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
