package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"golang.org/x/sys/unix"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// prober sends HTTP requests to a ClusterIP from inside a network namespace,
// one after the other, and counts who answered and what failed.
type prober struct {
	mu       sync.Mutex
	answers  map[string]int
	failures []string
}

func (pr *prober) snapshot() (map[string]int, []string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	a := make(map[string]int, len(pr.answers))
	for k, v := range pr.answers {
		a[k] = v
	}
	return a, append([]string(nil), pr.failures...)
}

// waitAnswers waits for n more answers from who, failing with what went wrong.
func (pr *prober) waitAnswers(t *testing.T, what, who string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		a, f := pr.snapshot()
		if a[who] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: answers %v, %d failures, last: %v", what, a, len(f), f[max(0, len(f)-3):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reset forgets the answers so far (failures are kept).
func (pr *prober) reset() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.answers = map[string]int{}
}

// probe runs until ctx is done on a thread of its own that has entered
// netns, so that its sockets are the namespace's (the thread is discarded
// afterwards: it is never unlocked).
func (pr *prober) probe(ctx context.Context, netns, addr string, done chan<- error) {
	runtime.LockOSThread()
	fd, err := unix.Open(filepath.Join("/var/run/netns", netns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		done <- fmt.Errorf("open netns %s: %w", netns, err)
		return
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		done <- fmt.Errorf("enter netns %s: %w", netns, err)
		return
	}
	// A fresh connection per request, dialled from this goroutine (an
	// http.Transport would dial from another thread, outside the namespace).
	for ctx.Err() == nil {
		answer, err := get(addr)
		pr.mu.Lock()
		switch {
		case err == nil:
			pr.answers[answer]++
		case ctx.Err() == nil:
			pr.failures = append(pr.failures, time.Now().Format("15:04:05.000")+" "+err.Error())
		}
		pr.mu.Unlock()
	}
	done <- nil
}

// get sends GET / over HTTP/1.0 to addr and returns the first line of the
// body of a 200 answer.
func get(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		return "", fmt.Errorf("send: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", fmt.Errorf("read answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("answer %s", resp.Status)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// TestProxyRestartKeepsServing stops the proxy while a client keeps sending
// requests to a ClusterIP: the rules stay and traffic still flows; the
// Service's endpoint is replaced while the proxy is down (the old rules keep
// sending traffic to the old one); a new proxy reconciles the rules (only the
// new endpoint gets traffic, the old endpoint's chain is gone). At no point
// is a request refused or lost: the guard never rejects in between.
func TestProxyRestartKeepsServing(t *testing.T) {
	ctx := context.Background()
	netns, runner := testNetns(t)
	inNetns(t, netns, "ip", "addr", "add", "10.244.1.5/32", "dev", "lo")
	inNetns(t, netns, "ip", "addr", "add", "10.244.1.6/32", "dev", "lo")
	inNetns(t, netns, "ip", "route", "add", "10.96.0.0/12", "dev", "lo", "src", "10.244.1.5")
	for _, ep := range []struct{ addr, body string }{{"10.244.1.5", "old"}, {"10.244.1.6", "new"}} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "index.html"), []byte(ep.body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		httpd := exec.Command("ip", "netns", "exec", netns, "/bin/busybox", "httpd", "-f", "-p", ep.addr+":8080", "-h", root)
		if err := httpd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = httpd.Process.Kill(); _ = httpd.Wait() })
	}
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), runner); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	client := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))

	run := func() (*Proxy, func()) {
		p, err := New(Options{Client: client, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
			MinSyncPeriod: 10 * time.Millisecond, Iptables: runner, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(pctx) }()
		stop := func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		t.Cleanup(func() {
			select {
			case <-pctx.Done():
			default:
				stop()
			}
		})
		return p, stop
	}
	first, stopFirst := run()
	eventually(t, "the first proxy's first sync", func() bool { return first.Stats().FullRestores == 1 })

	pr := &prober{answers: map[string]int{}}
	pctx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan error, 1)
	go pr.probe(pctx, netns, "10.96.0.10:80", probeDone)
	t.Cleanup(func() { stopProbe(); <-probeDone })
	pr.waitAnswers(t, "answers from the old endpoint", "old", 20)

	// The proxy stops: the rules stay, traffic keeps flowing.
	stopFirst()
	svcChain := iptables.SVCChain("default/web:http", "TCP")
	oldSEP := iptables.SEPChain("default/web:http", "TCP", "10.244.1.5:8080")
	newSEP := iptables.SEPChain("default/web:http", "TCP", "10.244.1.6:8080")
	saved := inNetns(t, netns, "iptables-save", "-t", "nat")
	if !strings.Contains(saved, ":"+svcChain+" ") || !strings.Contains(saved, ":"+oldSEP+" ") {
		t.Fatalf("the rules went with the proxy:\n%s", saved)
	}
	pr.reset()
	pr.waitAnswers(t, "answers while the proxy is down", "old", 20)

	// The endpoint is replaced while no proxy runs: the old rules still send
	// traffic to the old endpoint (which still serves here).
	slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints[0].Addresses = []string{"10.244.1.6"}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pr.reset()
	pr.waitAnswers(t, "more answers while the proxy is down", "old", 20)

	// A new proxy reconciles: only the new endpoint gets traffic.
	second, _ := run()
	eventually(t, "the second proxy's first sync", func() bool { return second.Stats().FullRestores == 1 })
	if s := second.Stats(); s.LastError != nil {
		t.Fatalf("second proxy: %v", s.LastError)
	}
	pr.reset()
	pr.waitAnswers(t, "answers from the new endpoint", "new", 20)
	pr.reset() // a request in flight at the resync may still have reached the old one
	pr.waitAnswers(t, "more answers from the new endpoint", "new", 20)
	answers, failures := pr.snapshot()
	if answers["old"] > 0 {
		t.Errorf("after the resync the old endpoint still got %d requests (new: %d)", answers["old"], answers["new"])
	}
	saved = inNetns(t, netns, "iptables-save", "-t", "nat")
	if strings.Contains(saved, oldSEP) || !strings.Contains(saved, ":"+newSEP+" ") {
		t.Errorf("after the resync nat holds the old endpoint's chain or lacks the new one's:\n%s", saved)
	}
	stopProbe()
	if err := <-probeDone; err != nil {
		t.Fatal(err)
	}
	probeDone <- nil // for the clean-up's receive
	if len(failures) > 0 {
		t.Errorf("%d requests failed across the restart (the guard or a missing rule refused them), first: %v", len(failures), failures[:min(5, len(failures))])
	}
}
