package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/flowcluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/trace"
)

// startFlowCluster runs a control plane with the Deployment and ReplicaSet controllers,
// the scheduler and one simulated node in this process, and returns its admin kubeconfig.
func startFlowCluster(t *testing.T) string {
	t.Helper()
	return flowcluster.Start(t).Kubeconfig
}

// kubectlProxy runs `kubectl proxy` on a free port, as a user would to reach /ui/, and
// returns its address.
func kubectlProxy(t *testing.T, kubectl, kubeconfig string) string {
	t.Helper()
	cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "proxy", "--address=127.0.0.1", "--port=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl proxy: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := regexp.MustCompile(`Starting to serve on (\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("kubectl proxy ended: %s", stderr.String())
		}
		return a
	case <-time.After(time.Minute):
		t.Fatalf("kubectl proxy did not start: %s", stderr.String())
	}
	return ""
}

// gate is a reverse proxy in front of kubectl proxy that keeps the page's diagram
// requests, after its first diagram, waiting until the test opens it: the browser's
// virtual time stands still while a request is pending, so the page sees the cluster
// change between two of its polls, however slowly the change happens.
type gate struct {
	proxy *httputil.ReverseProxy
	open  chan struct{}
	first chan struct{} // closed when the first diagram went out

	mu       sync.Mutex
	diagrams []string // SVG bodies sent, in order
	notMod   int      // 304 answers
	errs     []string
}

func newGate(target string) *gate {
	u := &url.URL{Scheme: "http", Host: target}
	g := &gate{proxy: httputil.NewSingleHostReverseProxy(u), open: make(chan struct{}), first: make(chan struct{})}
	g.proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/ui/api/trace" || resp.Request.URL.Query().Get("format") != "svg" {
			return nil
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		switch resp.StatusCode {
		case http.StatusNotModified:
			g.notMod++
		case http.StatusOK:
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			g.diagrams = append(g.diagrams, string(body))
			if len(g.diagrams) == 1 {
				close(g.first)
			}
		default:
			body, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(body))
			g.errs = append(g.errs, fmt.Sprintf("%d %s", resp.StatusCode, body))
		}
		return nil
	}
	return g
}

func (g *gate) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/ui/api/trace" {
		select {
		case <-g.first:
			<-g.open
		default:
		}
	}
	g.proxy.ServeHTTP(w, req)
}

// runningPods waits until n pods of app=web are Running.
func runningPods(t *testing.T, client kubernetes.Interface, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, nil
	})
	if err != nil {
		t.Fatalf("%d pods Running: %v", n, err)
	}
}

// TestUIInChromium opens the /ui/ page through kubectl proxy in headless Chromium on a
// Deployment created with kubectl, scales it with kubectl while the page is open, and
// checks the page's DOM: the namespace's objects are listed and the diagram, an inline
// <svg>, was redrawn with the scale-up's steps; unchanged polls got 304 and no redraw.
func TestUIInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	chromium := needs.Binary(t, "chromium", "chromium")
	kubectl := needs.Binary(t, "kubectl", "kubectl")
	kubeconfig := startFlowCluster(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("create", "deployment", "web", "--image=busybox:local", "--replicas=1")
	runningPods(t, client, 1)

	g := newGate(kubectlProxy(t, kubectl, kubeconfig))
	front := httptest.NewServer(g)
	t.Cleanup(front.Close)
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(g.open)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
		"--disable-domain-reliability", "--no-proxy-server", "--metrics-recording-only",
		"--virtual-time-budget=30000", "--dump-dom", front.URL+"/ui/#default/deployment/web")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var dom, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &dom, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	select {
	case <-g.first:
	case err := <-exited:
		t.Fatalf("chromium ended before the page drew a diagram: %v\n%s", err, stderr.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("the page asked for no diagram\n%s", stderr.String())
	}
	// The page waits for its next diagram while the Deployment scales to 3.
	run("scale", "deployment", "web", "--replicas=3")
	runningPods(t, client, 3)
	// The scheduler's steps for the new pods are in the records, and the flow has come to
	// rest (the same diagram twice in a row, a second apart), so that the page, once let
	// through, draws the scale-up and then finds its diagram unchanged.
	previous := ""
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		in, err := trace.Collect(ctx, client, "Deployment", "default", "web")
		if err != nil {
			return false, err
		}
		binds := 0
		for _, r := range in.Records {
			if r.Subresource == "binding" && r.Code == 201 {
				binds++
			}
		}
		svg, err := trace.Draw(in, trace.DrawOptions{Format: "svg"})
		if err != nil {
			return false, err
		}
		done := binds == 3 && svg == previous
		previous = svg
		return done, nil
	})
	if err != nil {
		t.Fatalf("three bindings in a flow at rest: %v", err)
	}
	opened = true
	close(g.open)

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("chromium did not finish\n%s", stderr.String())
	}
	page := dom.String()

	g.mu.Lock()
	diagrams, notMod, errs := g.diagrams, g.notMod, g.errs
	g.mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("diagram errors: %v", errs)
	}
	if len(diagrams) < 2 {
		t.Fatalf("%d diagrams sent, want the first and one after the scale-up\nDOM:\n%s", len(diagrams), page)
	}
	if notMod == 0 {
		t.Errorf("no 304 Not Modified: the page never found the diagram unchanged")
	}
	first, last := diagrams[0], diagrams[len(diagrams)-1]
	scale := "PATCH /apis/apps/v1/namespaces/default/deployments/web/scale"
	if strings.Contains(first, scale) {
		t.Errorf("the first diagram already has the scale-up:\n%s", first)
	}

	// The object list: the Deployment, its ReplicaSet and its three pods.
	pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`<option value="default">default</option>`, `data-kind="deployment" data-name="web"`, `data-kind="replicaset" data-name="web-`}
	for _, p := range pods.Items {
		want = append(want, fmt.Sprintf(`data-kind="pod" data-name="%s"`, p.Name))
	}
	// The diagram in the DOM is the last one sent, with the flow's participants and steps.
	want = append(want, fmt.Sprintf(`data-renders="%d"`, len(diagrams)), "<svg ", scale,
		">kubectl<", ">"+trace.APIServer+"<", ">"+trace.Etcd+"<", ">deployment-controller<", ">replicaset-controller<", ">scheduler<",
		"POST /apis/apps/v1/namespaces/default/deployments → 201", "POST /apis/apps/v1/namespaces/default/replicasets → 201",
		"POST /api/v1/namespaces/default/pods → 201")
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %s", w)
		}
	}
	if !strings.Contains(last, scale) {
		t.Errorf("the last diagram lacks the scale-up %q", scale)
	}
	t.Logf("%d diagrams drawn, %d polls answered 304 Not Modified", len(diagrams), notMod)
	if t.Failed() || testing.Verbose() {
		t.Logf("DOM:\n%s", page)
	}
}
