// Command startup measures how fast `kubette up` becomes ready and how much
// memory it holds when idle. Each run starts the binary on a fresh data directory
// and a free port, times exec → /readyz 200 over HTTPS (with the CA and client
// certificate of the admin kubeconfig it writes), idles, reads the process's
// VmRSS and stops it with SIGTERM. A last run restarts on the data directory of
// a previous one.
//
//	go build -o /tmp/kubette ./cmd/kubette && go run ./bench/startup --kubette /tmp/kubette
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
)

// pollInterval is how often the kubeconfig file and /readyz are polled.
const pollInterval = 5 * time.Millisecond

// options are the command-line flags.
type options struct {
	kubette string
	runs    int
	idle    time.Duration
	timeout time.Duration
	keep    bool
}

func main() {
	var o options
	flag.StringVar(&o.kubette, "kubette", "kubette", "the kubette binary (a name is looked up in PATH)")
	flag.IntVar(&o.runs, "runs", 5, "start-ups on a fresh data directory (one more restarts on an existing one)")
	flag.DurationVar(&o.idle, "idle", 5*time.Second, "idle time before reading the resident memory")
	flag.DurationVar(&o.timeout, "timeout", time.Minute, "give up on a start-up that is not ready after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary data directories")
	flag.Parse()
	if o.runs < 1 {
		fmt.Fprintln(os.Stderr, "--runs must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// result is what one start-up measured.
type result struct {
	label        string
	kubeconfigAt time.Duration // exec → the kubeconfig parsed
	ready        time.Duration // exec → /readyz 200
	selfReported string        // "ready in N ms" as kubette printed it, if it did
	reused       bool          // the kubeconfig existed before the start (a restart)
	rss          int64         // VmRSS after the idle period
	exitCode     int           // after SIGTERM; -1 when killed or unknown
	stopTook     time.Duration // SIGTERM → exit
}

func run(ctx context.Context, o options, out io.Writer) error {
	bin, err := exec.LookPath(o.kubette)
	if err != nil {
		return fmt.Errorf("find kubette binary: %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return fmt.Errorf("resolve kubette binary: %w", err)
	}
	base, err := os.MkdirTemp("", "kubette-startup-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	if o.keep {
		fmt.Fprintf(out, "data dirs under %s\n", base)
	} else {
		defer os.RemoveAll(base)
	}
	fmt.Fprintf(out, "binary:    %s\n", bin)
	fmt.Fprintf(out, "runs:      %d fresh + 1 restart, idle %s before reading VmRSS, poll every %s\n", o.runs, o.idle, pollInterval)

	var results []result
	var lastDir string
	var lastPort int
	for i := range o.runs {
		dir := filepath.Join(base, fmt.Sprintf("run%d", i+1)) // absent: kubette up creates it
		port, err := freePort()
		if err != nil {
			return err
		}
		r, err := startOnce(ctx, bin, dir, port, o)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		r.label = fmt.Sprintf("run %d fresh", i+1)
		printResult(out, r)
		results = append(results, r)
		lastDir, lastPort = dir, port
	}
	// The restart reuses the data directory and port of the last run, so the
	// kubeconfig it left names the right address from the first poll on.
	r, err := startOnce(ctx, bin, lastDir, lastPort, o)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	r.label = "restart"
	printResult(out, r)

	var ready, rss []float64
	for _, f := range results {
		ready = append(ready, float64(f.ready))
		rss = append(rss, benchutil.MiB(f.rss))
	}
	lo, hi := minMax(ready)
	fmt.Fprintf(out, "ready:     fresh min %s median %s max %s   restart %s\n",
		benchutil.FormatDuration(time.Duration(lo)), benchutil.FormatDuration(time.Duration(benchutil.Median(ready))),
		benchutil.FormatDuration(time.Duration(hi)), benchutil.FormatDuration(r.ready))
	lo, hi = minMax(rss)
	fmt.Fprintf(out, "idle RSS:  fresh min %.1f MiB median %.1f MiB max %.1f MiB   restart %.1f MiB\n",
		lo, benchutil.Median(rss), hi, benchutil.MiB(r.rss))
	clean := 0
	for _, f := range append(results, r) {
		if f.exitCode == 0 {
			clean++
		}
	}
	fmt.Fprintf(out, "SIGTERM:   %d/%d exited 0\n", clean, len(results)+1)
	return nil
}

func minMax(v []float64) (lo, hi float64) {
	for i, x := range v {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

func printResult(out io.Writer, r result) {
	detail := "kubeconfig at " + benchutil.FormatDuration(r.kubeconfigAt)
	if r.reused {
		detail = "kubeconfig from the previous run"
	}
	if r.selfReported != "" {
		detail += ", kubette says " + r.selfReported
	}
	exit := fmt.Sprintf("exit %d", r.exitCode)
	if r.exitCode < 0 {
		exit = "killed"
	}
	fmt.Fprintf(out, "%-14s ready %s (%s)  idle RSS %.1f MiB  SIGTERM: %s in %s\n",
		r.label+":", benchutil.FormatDuration(r.ready), detail,
		benchutil.MiB(r.rss), exit, benchutil.FormatDuration(r.stopTook))
}

// freePort returns a TCP port that was free on all interfaces a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("release port %d: %w", port, err)
	}
	return port, nil
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutines of exec.Cmd and
// concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var readyLine = regexp.MustCompile(`ready in (\d+ ms)`)

// startOnce runs `kubette up` on dir and port, measures it and stops it.
func startOnce(ctx context.Context, bin, dir string, port int, o options) (r result, err error) {
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if _, err := os.Stat(kubeconfig); err == nil {
		r.reused = true
	}
	var stdout, stderr lockedBuffer
	cmd := exec.Command(bin, "up", "--data-dir", dir, "--port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped { // an error path: do not leave the process behind
			_, _, _ = stop(cmd, exited)
		}
		if err != nil {
			err = fmt.Errorf("%w\nkubette stderr (tail):\n%s", err, tail(stderr.String(), 15))
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var client *http.Client
	var readyz string
	for r.ready == 0 {
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("not ready after %s: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
		case werr := <-exited:
			stopped = true
			return r, fmt.Errorf("kubette exited before it was ready: %v", werr)
		case <-ticker.C:
		}
		if client == nil {
			rc, err := loadKubeconfig(kubeconfig)
			if err != nil {
				continue // not written yet, or written half
			}
			r.kubeconfigAt = time.Since(start)
			if client, err = rest.HTTPClientFor(rc); err != nil {
				return r, fmt.Errorf("HTTP client from %s: %w", kubeconfig, err)
			}
			client.Timeout = time.Second
			defer client.CloseIdleConnections()
			readyz = strings.TrimRight(rc.Host, "/") + "/readyz"
		}
		if readyzOK(ctx, client, readyz) {
			r.ready = time.Since(start)
		}
	}
	// Hold no connection while idle: the measured process should be on its own.
	client.CloseIdleConnections()

	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case werr := <-exited:
		stopped = true
		return r, fmt.Errorf("kubette exited while idle: %v", werr)
	case <-time.After(o.idle):
	}
	if r.rss, err = benchutil.ReadRSS(cmd.Process.Pid); err != nil {
		return r, err
	}
	// Read after the idle period: on a restart /readyz can answer before kubette prints.
	if m := readyLine.FindStringSubmatch(stdout.String()); m != nil {
		r.selfReported = m[1]
	}
	stopped = true
	if r.exitCode, r.stopTook, err = stop(cmd, exited); err != nil {
		return r, err
	}
	return r, nil
}

// loadKubeconfig reads the kubeconfig at path into a client config.
func loadKubeconfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("client config from %s: %w", path, err)
	}
	return rc, nil
}

// readyzOK reports whether GET url answered 200.
func readyzOK(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop sends SIGTERM, waits up to 20 s (then kills) and returns the exit code
// (-1 when killed by a signal) and how long the exit took.
func stop(cmd *exec.Cmd, exited <-chan error) (code int, took time.Duration, err error) {
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return -1, 0, fmt.Errorf("send SIGTERM: %w", err)
	}
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return -1, time.Since(start), fmt.Errorf("kubette did not exit within 20s of SIGTERM; killed")
	}
	took = time.Since(start)
	if werr == nil {
		return 0, took, nil
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		return ee.ExitCode(), took, nil
	}
	return -1, took, fmt.Errorf("wait for kubette: %w", werr)
}
