package apiserver

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves the Go runtime profiles under /debug/pprof/, as upstream's API
// server does with --profiling (its default).
func servePprof(w http.ResponseWriter, req *http.Request) {
	switch strings.TrimPrefix(req.URL.Path, "/debug/pprof/") {
	case "cmdline":
		pprof.Cmdline(w, req)
	case "profile":
		pprof.Profile(w, req)
	case "symbol":
		pprof.Symbol(w, req)
	case "trace":
		pprof.Trace(w, req)
	default:
		pprof.Index(w, req)
	}
}
