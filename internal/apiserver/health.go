package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// healthCheck is one named check of /healthz, /livez or /readyz.
type healthCheck struct {
	name  string
	check func(ctx context.Context) error
}

// etcdCheckTimeout bounds the storage check, as upstream's etcd health check timeout.
const etcdCheckTimeout = 2 * time.Second

// healthChecks returns the checks of an endpoint (healthz, livez or readyz): ping (the
// server answers), etcd (the store answers), and for readyz watch-caches (every watch
// cache and the Service allocators have loaded; until then lists at resourceVersion=0 and
// watches cannot be served).
func (s *Server) healthChecks(endpoint string) []healthCheck {
	checks := []healthCheck{
		{"ping", func(context.Context) error { return nil }},
		{"etcd", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, etcdCheckTimeout)
			defer cancel()
			if _, err := s.cfg.Store.CurrentRevision(ctx); err != nil {
				return fmt.Errorf("storage: %w", err)
			}
			return nil
		}},
	}
	if endpoint == "readyz" {
		checks = append(checks, healthCheck{"watch-caches", func(context.Context) error {
			if !s.ready() {
				return errors.New("the watch caches have not loaded yet")
			}
			return nil
		}})
	}
	return checks
}

// serveHealth answers /healthz, /livez and /readyz as upstream's health handlers: the root
// runs every check not named by an exclude parameter and answers "ok", or with verbose
// one line per check and "<endpoint> check passed"; a failure answers 500 with the lines
// (reasons withheld, they go to the log) and "<endpoint> check failed". /<endpoint>/<check>
// runs one check: "ok", or 500 "internal server error: <reason>". Any other path is 404.
func (s *Server) serveHealth(w http.ResponseWriter, req *http.Request, endpoint string) {
	checks := s.healthChecks(endpoint)
	rest := strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, "/"+endpoint), "/")
	if rest != "" {
		for _, c := range checks {
			if c.name == rest {
				if err := c.check(req.Context()); err != nil {
					http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = w.Write([]byte("ok"))
				return
			}
		}
		http.NotFound(w, req)
		return
	}
	q := req.URL.Query()
	excluded := map[string]bool{}
	for _, e := range q["exclude"] {
		for _, name := range strings.Split(e, ",") {
			if name = strings.TrimSpace(name); name != "" {
				excluded[name] = true
			}
		}
	}
	var out strings.Builder
	var failed []string
	for _, c := range checks {
		if excluded[c.name] {
			delete(excluded, c.name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
			continue
		}
		if err := c.check(req.Context()); err != nil {
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
			failed = append(failed, c.name)
			s.log.Info(endpoint+" check failed", "check", c.name, "err", err)
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.name)
	}
	if len(excluded) > 0 {
		names := make([]string, 0, len(excluded))
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		sort.Strings(names)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if len(failed) > 0 {
		http.Error(w, out.String()+endpoint+" check failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := q["verbose"]; !verbose {
		_, _ = w.Write([]byte("ok"))
		return
	}
	_, _ = w.Write([]byte(out.String() + endpoint + " check passed\n"))
}
