package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// background runs kubectl until the test ends (or stop is called) with its output in out.
func (nc *nodeCluster) background(t *testing.T, args ...string) (out *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := nc.kubectlCmd(ctx, nil, args...)
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return out, stop
}

// TestExecAttachPortForward runs kubectl exec, attach and port-forward against real
// containers: the API server's pods/exec, pods/attach and pods/portforward, the kubelet's
// proxy and the runtime's streaming server (runc exec, the shim's attach socket, a dial in
// the pod's network namespace).
func TestExecAttachPortForward(t *testing.T) {
	nc := startNodeCluster(t)
	registry := testimage.Registry(t)
	busybox, server := registry+"/kubette/busybox:v1", registry+"/kubette/server:v1"
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))

	nc.must(t, "run", "shell", "--image="+busybox, "--", "sleep", "3600")
	nc.waitPod(t, "shell", "Running", 90*time.Second, running)

	// exec: output, stdin, exit code.
	if got := nc.must(t, "exec", "shell", "--", "cat", "/etc/hostname"); got != "shell\n" {
		t.Errorf("kubectl exec shell -- cat /etc/hostname = %q, want \"shell\\n\"", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := nc.kubectlCmd(ctx, nil, "exec", "-i", "shell", "--", "cat")
	cmd.Stdin = strings.NewReader("hi\nthere\n")
	if out, err := cmd.Output(); err != nil || string(out) != "hi\nthere\n" {
		t.Errorf("echo hi | kubectl exec -i shell -- cat = %q, %v", out, err)
	}
	r := nc.kubectl(t, "exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
		t.Errorf("exit 3 in the pod: %s", r)
	}
	if r := nc.mustFail(t, "exec", "shell", "-c", "nope", "--", "true"); !strings.Contains(r.stderr, "container nope is not valid for pod shell") {
		t.Errorf("exec into an unknown container: %s", r)
	}

	// exec -it with a terminal from the test: kubectl sends its terminal's size, which the
	// process's terminal gets (the process asks until it has one, should the size arrive late).
	tctx, tcancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer tcancel()
	cmd = nc.kubectlCmd(tctx, nil, "exec", "-it", "shell", "--", "sh", "-c",
		`tty; s=$(stty size 2>/dev/null); until [ -n "$s" ]; do sleep 0.1; s=$(stty size 2>/dev/null); done; echo "$s"; exit 4`)
	term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 31, Cols: 101})
	if err != nil {
		t.Fatalf("start kubectl exec -it: %v", err)
	}
	var ttyOut syncBuffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&ttyOut, term) // ends with EIO once kubectl has exited
		close(copied)
	}()
	err = cmd.Wait()
	<-copied
	term.Close()
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(ttyOut.String(), "/dev/pts/") || !strings.Contains(ttyOut.String(), "31 101") {
		t.Errorf("kubectl exec -it: %v, output %q; want exit 4, a /dev/pts terminal of 31 rows and 101 columns", err, ttyOut.String())
	}

	// attach to a container that prints: its output from now on.
	nc.must(t, "run", "ticker", "--image="+busybox, "--", "sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done")
	nc.waitPod(t, "ticker", "Running", 90*time.Second, running)
	attached, stopAttach := nc.background(t, "attach", "ticker")
	if !poll(60*time.Second, func() bool { return regexp.MustCompile(`tick \d+\n`).MatchString(attached.String()) }) {
		t.Errorf("kubectl attach ticker printed %q, want its ticks", attached.String())
	}
	stopAttach()

	// attach -i to a container with stdin (stdinOnce): what is piped in reaches it, and the end
	// of the pipe closes its stdin, so that it exits.
	applyJSON(t, nc.cluster, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"echoer"},"spec":{"restartPolicy":"Never",
		"containers":[{"name":"echoer","image":"`+busybox+`","stdin":true,"stdinOnce":true,
		"command":["sh","-c","while read l; do echo got $l; done; echo bye"]}]}}`)
	nc.waitPod(t, "echoer", "Running", 90*time.Second, running)
	actx, acancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer acancel()
	cmd = nc.kubectlCmd(actx, nil, "attach", "-i", "echoer")
	cmd.Stdin = strings.NewReader("one\ntwo\n")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "got one\ngot two\nbye\n") {
		t.Errorf("kubectl attach -i echoer: %v\n%s", err, out)
	}
	p := nc.waitPod(t, "echoer", "Succeeded", 60*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if got := nc.must(t, "logs", "echoer"); got != "got one\ngot two\nbye\n" {
		t.Errorf("echoer's log %q (phase %s)", got, p.Status.Phase)
	}

	// port-forward: a local port reaches the pod's port 8080.
	nc.must(t, "run", "web", "--image="+server, "--env=TERM_DELAY=0")
	p = nc.waitPod(t, "web", "Running", 90*time.Second, running)
	// Forward once the server listens: a refused forwarded connection ends kubectl's forwarding.
	httpGet(t, "http://"+p.Status.PodIP+":8080/")
	fwd, stopForward := nc.background(t, "port-forward", "pod/web", "0:8080")
	forwarding := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
	var local string
	if !poll(60*time.Second, func() bool {
		if m := forwarding.FindStringSubmatch(fwd.String()); m != nil {
			local = m[1]
			return true
		}
		return false
	}) {
		t.Fatalf("kubectl port-forward pod/web 0:8080 printed %q", fwd.String())
	}
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%s/through-the-tunnel", local)); !strings.Contains(body, "path=/through-the-tunnel") || !strings.Contains(body, "hostname=web") {
		t.Errorf("GET through the forwarded port = %q", body)
	}
	stopForward()
}
