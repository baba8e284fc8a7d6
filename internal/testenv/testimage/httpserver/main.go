// Command httpserver is the program inside testimage.HTTPServer: a small HTTP server for
// node and end-to-end tests. It listens on $PORT (default 8080) and serves
//
//	GET /          "hostname=<hostname> pod=<$POD_NAME> path=<path>"
//	GET /healthz   200, or 500 while the file /tmp/unhealthy exists
//	GET /env       the environment, one VAR=value per line
//	GET /alloc?mb=N allocates and touches N MiB and holds them until exit (for OOM tests)
//
// It logs one line per request to stdout. On SIGTERM it prints "received SIGTERM", waits
// $TERM_DELAY seconds (default 0) and exits 0.
//
// `server get URL [N]` is a client instead: it fetches URL N times (default 1) with Go's own
// resolver (which honours resolv.conf's search path and ndots), printing each answer's body
// on a line, or "error: ..." — for tests that reach Services by name from inside a pod.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2:]))
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	delay, err := envSeconds("TERM_DELAY")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: ":" + port, Handler: newHandler()}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("listening on :%s\n", port)
	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	fmt.Println("received SIGTERM")
	time.Sleep(delay)
	os.Exit(0)
}

// envSeconds reads a whole number of seconds from the environment; unset means 0.
func envSeconds(key string) (time.Duration, error) {
	v := os.Getenv(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("$%s=%q: want a number of seconds", key, v)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// handler serves the endpoints; held keeps the memory /alloc allocated alive.
type handler struct {
	mu   sync.Mutex
	held [][]byte
}

func newHandler() http.Handler {
	h := &handler{}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/env", h.env)
	mux.HandleFunc("/alloc", h.alloc)
	mux.HandleFunc("/", h.root)
	return logRequests(mux)
}

func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("%s %s %s\n", r.RemoteAddr, r.Method, r.URL.RequestURI())
		next.ServeHTTP(w, r)
	})
}

func (h *handler) root(w http.ResponseWriter, r *http.Request) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "hostname=%s pod=%s path=%s\n", host, os.Getenv("POD_NAME"), r.URL.Path)
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	if _, err := os.Stat("/tmp/unhealthy"); err == nil {
		http.Error(w, "unhealthy", http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (h *handler) env(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintln(w, strings.Join(os.Environ(), "\n"))
}

func (h *handler) alloc(w http.ResponseWriter, r *http.Request) {
	mb, err := strconv.Atoi(r.URL.Query().Get("mb"))
	if err != nil || mb < 0 {
		http.Error(w, "want ?mb=N", http.StatusBadRequest)
		return
	}
	b := make([]byte, mb<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	h.mu.Lock()
	h.held = append(h.held, b)
	total := 0
	for _, x := range h.held {
		total += len(x)
	}
	h.mu.Unlock()
	fmt.Fprintf(w, "allocated %d MiB, holding %d MiB\n", mb, total>>20)
}

// get is the client mode: fetch a URL N times and print each body (or error) on a line.
func get(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: server get URL [N]")
		return 2
	}
	n := 1
	if len(args) > 1 {
		v, err := strconv.Atoi(args[1])
		if err != nil || v < 1 {
			fmt.Fprintln(os.Stderr, "bad count:", args[1])
			return 2
		}
		n = v
	}
	client := &http.Client{Timeout: 5 * time.Second}
	failed := 0
	for range n {
		resp, err := client.Get(args[0])
		if err != nil {
			fmt.Println("error:", err)
			failed++
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		fmt.Println(strings.TrimSpace(string(body)))
	}
	if failed == n {
		return 1
	}
	return 0
}
