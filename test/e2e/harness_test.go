package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	testpoll "github.com/kubette/kubette/internal/testenv/poll"
)

const (
	startTimeout   = 30 * time.Second // until `kubette up` prints the kubeconfig line
	stopTimeout    = 10 * time.Second // from SIGTERM until the process exited
	kubectlTimeout = 60 * time.Second // one kubectl invocation
)

// syncBuffer is a bytes.Buffer safe for a writing process and a polling test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort returns a loopback TCP port that was free a moment ago (testenv/poll's
// FreePort, under the name the e2e tests call it by).
func freePort(t *testing.T) int {
	t.Helper()
	return testpoll.FreePort(t)
}

// poll calls cond every 50 ms until it returns true or timeout passed, and reports
// whether it did.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proc is a background process whose stdout and stderr go to one buffer.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when the process exited; err is then set
	err  error
}

// startProc starts bin with args. Unless the test stopped it, a cleanup sends SIGTERM
// and asserts the process exits within stopTimeout, with status 0 when cleanExit;
// another dumps its output if the test failed.
func startProc(t *testing.T, name string, cleanExit bool, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	// Cleanups run last-registered first: stop, then dump the whole output.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of %s (%s):\n%s", name, strings.Join(p.cmd.Args, " "), p.out.String())
		}
	})
	t.Cleanup(func() {
		if p.exited() {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if cleanExit && p.err != nil {
				t.Errorf("%s exited with %v after SIGTERM at cleanup, want status 0", name, p.err)
			}
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not exit within %s of SIGTERM at cleanup; killed it", name, stopTimeout)
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitForLine waits until a line of the output matches re and returns its submatches;
// it fails the test, with the output, when the process exits first or timeout passes.
func (p *proc) waitForLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	var m []string
	ok := poll(timeout, func() bool {
		m = re.FindStringSubmatch(p.out.String())
		return m != nil || p.exited()
	})
	switch {
	case m != nil:
		return m
	case !ok:
		t.Fatalf("%s printed no line matching %q within %s; output so far:\n%s", p.name, re, timeout, p.out.String())
	default:
		t.Fatalf("%s exited (%v) before printing a line matching %q; output:\n%s", p.name, p.err, re, p.out.String())
	}
	return nil
}

// stop sends SIGTERM and asserts the process exits within stopTimeout, with status 0
// when wantClean.
func (p *proc) stop(t *testing.T, wantClean bool) {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s had already exited (%v) before it was stopped; output:\n%s", p.name, p.err, p.out.String())
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not exit within %s of SIGTERM; killed it; output:\n%s", p.name, stopTimeout, p.out.String())
	}
	if wantClean && p.err != nil {
		t.Fatalf("%s exited with %v after SIGTERM (want status 0); output:\n%s", p.name, p.err, p.out.String())
	}
	t.Logf("%s stopped %s after SIGTERM", p.name, time.Since(start).Round(time.Millisecond))
}

// cluster is a kubette control plane (`kubette up`, or `kubette apiserver`) run by a test,
// with the kubectl environment that talks to it.
type cluster struct {
	name       string
	dataDir    string
	port       int
	extraArgs  []string // after the subcommand's --data-dir and --port
	subcommand string   // "up" or "apiserver"
	kubeconfig string
	home       string // HOME and KUBECACHEDIR parent for kubectl
	proc       *proc
}

var kubeconfigLine = regexp.MustCompile(`(?m)^kubeconfig: (.+)$`)

// startCluster runs `kubette up --node=false` (a control plane without a node) on a new data
// dir and a free port; startNodeCluster runs a whole cluster with this machine as its node.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startControlPlane(t, "up", "--node=false", "--ingress=false")
}

// startControlPlane runs `kubette <subcommand> --data-dir D --port P extraArgs...` on a
// new data dir and a free port, and waits until it is ready.
func startControlPlane(t *testing.T, subcommand string, extraArgs ...string) *cluster {
	t.Helper()
	requireTools(t)
	c := &cluster{
		name: "kubette " + subcommand, subcommand: subcommand, extraArgs: extraArgs,
		dataDir: t.TempDir(), home: t.TempDir(),
	}
	// Another process may take the port between freePort and the listen: retry then.
	for attempt := 1; ; attempt++ {
		c.port = freePort(t)
		if c.tryStart(t) || attempt == 3 {
			break
		}
	}
	switch {
	case c.proc.exited():
		t.Fatalf("%s exited (%v) before it was ready; output:\n%s", c.name, c.proc.err, c.proc.out.String())
	case !kubeconfigLine.MatchString(c.proc.out.String()):
		t.Fatalf("%s printed no kubeconfig line within %s; output so far:\n%s", c.name, startTimeout, c.proc.out.String())
	}
	c.waitReady(t)
	return c
}

// tryStart starts the process and reports false only when it failed because its
// port was taken.
func (c *cluster) tryStart(t *testing.T) bool {
	t.Helper()
	c.launch(t)
	poll(startTimeout, func() bool { return kubeconfigLine.MatchString(c.proc.out.String()) || c.proc.exited() })
	return !(c.proc.exited() && strings.Contains(c.proc.out.String(), "address already in use"))
}

func (c *cluster) launch(t *testing.T) {
	t.Helper()
	args := append([]string{c.subcommand, "--data-dir", c.dataDir, "--port", strconv.Itoa(c.port)}, c.extraArgs...)
	c.proc = startProc(t, c.name, true, tools.kubette, args...)
}

// waitReady waits for the "kubeconfig:" line and checks what it and the ready line say.
func (c *cluster) waitReady(t *testing.T) {
	t.Helper()
	m := c.proc.waitForLine(t, kubeconfigLine, startTimeout)
	c.kubeconfig = strings.TrimSpace(m[1])
	if want := filepath.Join(c.dataDir, "admin.kubeconfig"); c.kubeconfig != want {
		t.Errorf("%s printed kubeconfig %q, want %q", c.name, c.kubeconfig, want)
	}
	if _, err := os.Stat(c.kubeconfig); err != nil {
		t.Fatalf("kubeconfig printed by %s: %v", c.name, err)
	}
	ready := regexp.MustCompile(`(?m)^kubette \w+ ready in \d+ ms at https://127\.0\.0\.1:` + strconv.Itoa(c.port) + `$`)
	if !ready.MatchString(c.proc.out.String()) {
		t.Errorf("%s did not print a line matching %q before the kubeconfig line; output:\n%s", c.name, ready, c.proc.out.String())
	}
}

// stop SIGTERMs the control plane and asserts it exits 0 within stopTimeout.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	c.proc.stop(t, true)
	if !strings.Contains(c.proc.out.String(), "kubette stopped") {
		t.Errorf("%s exited without printing \"kubette stopped\"; output:\n%s", c.name, c.proc.out.String())
	}
}

// restart starts the control plane again on the same data dir and port.
func (c *cluster) restart(t *testing.T) {
	t.Helper()
	if !c.proc.exited() {
		t.Fatalf("restart of a running %s", c.name)
	}
	c.launch(t)
	c.waitReady(t)
}

// kubectlResult is what one kubectl run printed.
type kubectlResult struct {
	args           []string
	stdout, stderr string
	err            error
}

// String describes the run for failure messages.
func (r kubectlResult) String() string {
	status := "exit 0"
	if r.err != nil {
		status = r.err.Error()
	}
	return fmt.Sprintf("kubectl %s (%s)\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), status, r.stdout, r.stderr)
}

// kubectlCmd is a kubectl command against c with a private HOME and discovery cache.
// extraEnv entries (KEY=VALUE) are added to the environment.
func (c *cluster) kubectlCmd(ctx context.Context, extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tools.kubectl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	env := []string{}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "KUBECONFIG", "HOME", "KUBECACHEDIR", "KUBE_EDITOR", "EDITOR", "KUBECTL_EXTERNAL_DIFF":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+c.home, "KUBECACHEDIR="+filepath.Join(c.home, "cache"))
	cmd.Env = append(env, extraEnv...)
	return cmd
}

// kubectlEnv runs kubectl with extra environment variables and returns what it printed.
func (c *cluster) kubectlEnv(t *testing.T, extraEnv []string, args ...string) kubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := c.kubectlCmd(ctx, extraEnv, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", kubectlTimeout, err)
	}
	return kubectlResult{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// kubectl runs kubectl and returns what it printed, whether it succeeded or not.
func (c *cluster) kubectl(t *testing.T, args ...string) kubectlResult {
	t.Helper()
	return c.kubectlEnv(t, nil, args...)
}

// must runs kubectl, fails the test unless it succeeded, and returns its stdout.
func (c *cluster) must(t *testing.T, args ...string) string {
	t.Helper()
	r := c.kubectl(t, args...)
	if r.err != nil {
		t.Fatalf("kubectl failed: %s", r)
	}
	return r.stdout
}

// mustFail runs kubectl and fails the test unless kubectl failed; it returns the result.
func (c *cluster) mustFail(t *testing.T, args ...string) kubectlResult {
	t.Helper()
	r := c.kubectl(t, args...)
	var exitErr *exec.ExitError
	if r.err == nil || !errors.As(r.err, &exitErr) {
		t.Fatalf("kubectl should have failed with an error from the server: %s", r)
	}
	return r
}

// expectOutput runs kubectl, requires success and that stdout, trimmed, equals want.
func (c *cluster) expectOutput(t *testing.T, want string, args ...string) {
	t.Helper()
	r := c.kubectl(t, args...)
	if r.err != nil || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("want stdout %q: %s", want, r)
	}
}

// jsonpath returns `kubectl get <what> -o jsonpath=<expr>`.
func (c *cluster) jsonpath(t *testing.T, expr string, what ...string) string {
	t.Helper()
	args := append(append([]string{"get"}, what...), "-o", "jsonpath="+expr)
	return c.must(t, args...)
}

// writeFile writes content to a new file in a temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// deploymentManifest is a Deployment of nginx with three replicas, selecting app=<name>.
func deploymentManifest(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    app: %[1]s
spec:
  replicas: 3
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
`, name)
}

// tableRows splits kubectl's table output into rows of whitespace-separated fields.
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows = append(rows, f)
		}
	}
	return rows
}
