// Command ingress measures kubette's Ingress controller with a real API
// server (started in a temporary directory) and the real nginx: how long a
// change takes to be served (a new Ingress, an endpoint change) with 10 and
// 1000 Ingresses, what one configuration costs (build+render, nginx -t), and
// requests per second through nginx to one backend with a Go load generator
// on this host. Each measure is taken with endpoints through nginx's Lua
// balancer (no reload) and through reloads (plain upstreams), unless
// --endpoint-updates picks one. It prints plain lines meant to be pasted
// into a report.
//
// Backends listen on this host's default-route address (the API rejects
// loopback endpoint addresses); nginx listens on 127.0.0.1. No traffic
// leaves the host.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kubette/kubette/internal/hostaddr"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/ingress"
	"github.com/kubette/kubette/internal/ingress/nginx"
)

const ns = "default"

func main() {
	sizes := flag.String("ingresses", "10,1000", "comma-separated Ingress counts to measure")
	runs := flag.Int("runs", 5, "changes measured per size (median and max printed)")
	conc := flag.Int("concurrency", 32, "load generator connections")
	dur := flag.Duration("duration", 5*time.Second, "load generator duration")
	workers := flag.String("worker-processes", "auto", "nginx worker_processes")
	modes := flag.String("endpoint-updates", "lua,reload", "endpoint update modes to measure in turn: lua (the Lua balancer; fails without the module), reload (forces reloads and plain upstreams)")
	ctlLog := flag.Bool("controller-log", false, "print the ingress controller's debug log on stderr (what each sync did, and when)")
	flag.Parse()
	if !*ctlLog {
		// client-go's event broadcaster logs every Event it drops: the first sync
		// of 1000 Ingresses records more than its queue of 1000 holds.
		klog.SetOutput(io.Discard)
		klog.LogToStderr(false)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, mode := range strings.Split(*modes, ",") {
		if err := run(ctx, strings.TrimSpace(mode), *sizes, *runs, *conc, *dur, *workers, *ctlLog); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
	}
}

func run(ctx context.Context, mode, sizes string, runs, conc int, dur time.Duration, workers string, ctlLog bool) error {
	if mode != ingress.EndpointsLua && mode != ingress.EndpointsReload {
		return fmt.Errorf("bad --endpoint-updates entry %q: want lua or reload", mode)
	}
	dir, err := os.MkdirTemp("", "ingress-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: filepath.Join(dir, "cp"), BindAddress: "127.0.0.1", Port: freePort(), UnsafeNoFsync: true, Logger: quiet,
	})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() { cancel(); _ = cp.Wait() }()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hostAddr, err := hostaddr.DefaultRouteIPv4()
	if err != nil {
		return fmt.Errorf("backends need a local non-loopback address: %w", err)
	}
	hostIP := hostAddr.String()
	b1, stop1, err := backend(hostIP, "one")
	if err != nil {
		return err
	}
	defer stop1()
	b2, stop2, err := backend(hostIP, "two")
	if err != nil {
		return err
	}
	defer stop2()
	httpPort, httpsPort := freePort(), freePort()
	ctlLogger := quiet
	if ctlLog {
		ctlLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("mode", mode)
	}
	c, err := ingress.New(ingress.Options{
		Client: client, DataDir: filepath.Join(dir, "data"), HTTPPort: httpPort, HTTPSPort: httpsPort,
		ListenAddress: "127.0.0.1", PublishIP: hostIP, WorkerProcesses: workers, EndpointUpdates: mode, Logger: ctlLogger,
	})
	if err != nil {
		return err
	}
	if err := c.EnsureClass(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(hostIP, b1), metav1.CreateOptions{}); err != nil {
		return err
	}
	h := &prober{port: httpPort, client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	fmt.Printf("[%s] ingress bench: nginx on 127.0.0.1:%d, backends on %s, %d runs per size\n", mode, httpPort, hostIP, runs)

	created := 0
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad --ingresses entry %q", s)
		}
		start := time.Now()
		for ; created < n; created++ {
			if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing(fmt.Sprintf("i%d", created)), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		if err := h.waitBody(ctx, fmt.Sprintf("i%d.bench.example", n-1), "one"); err != nil {
			return err
		}
		fmt.Printf("[%s] %5d ingresses: all served %v after the first create\n", mode, n, time.Since(start).Round(time.Millisecond))
		if st := c.Stats(); st.Lua != (mode == ingress.EndpointsLua) {
			return fmt.Errorf("controller Lua=%v in mode %s", st.Lua, mode)
		}
		offline(mode, n, dir)
		st0 := c.Stats()
		var add, ep []time.Duration
		cur := "one" // the body the service answers now
		for r := range runs {
			name := fmt.Sprintf("new-%d-%d", n, r)
			t0 := time.Now()
			if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing(name), metav1.CreateOptions{}); err != nil {
				return err
			}
			if err := h.waitBody(ctx, name+".bench.example", cur); err != nil {
				return err
			}
			add = append(add, time.Since(t0))
			// Each step starts when the controller has finished the previous
			// one, so that two changes are never coalesced into one sync: nginx
			// answers from a new configuration before the controller has
			// confirmed its reload, and during a reload a new connection may
			// still reach an old worker (the deleted host's 404 could come from
			// the configuration before the create).
			if err := waitSettled(ctx, c, 0); err != nil {
				return err
			}
			reloads := c.Stats().Reloads
			if err := client.NetworkingV1().Ingresses(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			if err := waitSettled(ctx, c, reloads+1); err != nil {
				return err
			}
			if err := h.wait(ctx, name+".bench.example", func(code int, _ string) bool { return code == http.StatusNotFound }); err != nil {
				return err
			}
			// Endpoint change: the backend moves to the other server.
			to, body := b2, "two"
			if r%2 == 1 {
				to, body = b1, "one"
			}
			t0 = time.Now()
			if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice(hostIP, to), metav1.UpdateOptions{}); err != nil {
				return err
			}
			if err := h.waitBody(ctx, "i0.bench.example", body); err != nil {
				return err
			}
			ep = append(ep, time.Since(t0))
			cur = body
			if err := waitSettled(ctx, c, 0); err != nil {
				return err
			}
		}
		st := c.Stats()
		fmt.Printf("[%s] %5d ingresses: new Ingress -> served        %s\n", mode, n, summary(add))
		fmt.Printf("[%s] %5d ingresses: endpoint change -> served    %s\n", mode, n, summary(ep))
		fmt.Printf("[%s] %5d ingresses: during the runs %d syncs, %d nginx -t, %d reloads, %d endpoint pushes, %d failed reloads\n", mode, n,
			st.Syncs-st0.Syncs, st.Checks-st0.Checks, st.Reloads-st0.Reloads, st.EndpointPushes-st0.EndpointPushes, st.FailedReloads-st0.FailedReloads)
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice(hostIP, b1), metav1.UpdateOptions{}); err != nil {
			return err
		}
		if err := h.waitBody(ctx, "i0.bench.example", "one"); err != nil {
			return err
		}
	}
	return load(ctx, mode, httpPort, b1, hostIP, conc, dur)
}

// offline times Build+Render and nginx -t for n Ingresses, outside the
// controller, with Lua in mode lua.
func offline(mode string, n int, dir string) {
	var lua *nginx.Lua
	if mode == ingress.EndpointsLua {
		var err error
		if lua, err = nginx.DetectLua(context.Background(), "nginx", filepath.Join(dir, "offline-probe"), nil); err != nil {
			fmt.Println("offline:", err)
			return
		}
	}
	in := ingress.Inputs{Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}}}
	in.Slices = []*discoveryv1.EndpointSlice{slice("192.0.2.1", 8080)}
	for i := range n {
		in.Ingresses = append(in.Ingresses, ing(fmt.Sprintf("i%d", i)))
	}
	prefix := filepath.Join(dir, "offline")
	for _, d := range []string{"conf", "logs", "certs", "tmp", "run"} {
		_ = os.MkdirAll(filepath.Join(prefix, d), 0o700)
	}
	t0 := time.Now()
	m := ingress.Build(ingress.Layout{Prefix: prefix, ListenAddress: "127.0.0.1", HTTPPort: 1, HTTPSPort: 2, Lua: lua}, in)
	conf := nginx.Render(m.Config)
	build := time.Since(t0)
	file := filepath.Join(prefix, "conf", "nginx.conf")
	if err := os.WriteFile(file, conf, 0o644); err != nil {
		fmt.Println("offline:", err)
		return
	}
	t0 = time.Now()
	err := nginx.Check(context.Background(), "nginx", prefix, file)
	check := time.Since(t0)
	fmt.Printf("[%s] %5d ingresses: build+render %v (%d KiB), nginx -t %v (err %v)\n", mode, n, build.Round(time.Microsecond), len(conf)/1024, check.Round(time.Millisecond), err)
}

func ing(name string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	cls := ingress.DefaultClassName
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{IngressClassName: &cls, Rules: []networkingv1.IngressRule{{
			Host: name + ".bench.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &pt,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			}}}},
		}}},
	}
}

func slice(ip string, port int) *discoveryv1.EndpointSlice {
	name, p, ready := "http", int32(port), true
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "app", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}

func backend(ip, name string) (int, func(), error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	go func() { _ = srv.Serve(l) }()
	return l.Addr().(*net.TCPAddr).Port, func() { _ = srv.Close() }, nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type prober struct {
	port   int
	client *http.Client
}

// waitSettled waits until the controller has counted at least reloads
// reloads and has no sync running or waiting.
func waitSettled(ctx context.Context, c *ingress.Controller, reloads int64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if st := c.Stats(); st.Idle && st.Reloads >= reloads {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not settle within a minute (reloads %d, want %d)", c.Stats().Reloads, reloads)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitBody polls nginx every 2 ms until host answers 200 with body.
func (p *prober) waitBody(ctx context.Context, host, body string) error {
	return p.wait(ctx, host, func(code int, b string) bool { return code == http.StatusOK && b == body })
}

// wait polls nginx every 2 ms until host's answer to GET / satisfies ok.
func (p *prober) wait(ctx context.Context, host string, ok func(code int, body string) bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://127.0.0.1:%d/", p.port), nil)
		req.Host = host
		if resp, err := p.client.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode, string(b)) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered as expected", host)
}

func summary(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("median %v  max %v  (n=%d)", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// load runs conc keep-alive clients for dur, through nginx and then
// directly to the backend for comparison.
func load(ctx context.Context, mode string, nginxPort, backendPort int, hostIP string, conc int, dur time.Duration) error {
	for _, target := range []struct{ what, url, host string }{
		{"through nginx", fmt.Sprintf("http://127.0.0.1:%d/", nginxPort), "i0.bench.example"},
		{"direct to backend", fmt.Sprintf("http://%s/", net.JoinHostPort(hostIP, strconv.Itoa(backendPort))), ""},
	} {
		tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		var ok, fail atomic.Int64
		lat := make([][]time.Duration, conc)
		stopAt := time.Now().Add(dur)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range conc {
			wg.Go(func() {
				for time.Now().Before(stopAt) && ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", target.url, nil)
					if target.host != "" {
						req.Host = target.host
					}
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						fail.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						fail.Add(1)
						continue
					}
					ok.Add(1)
					lat[i] = append(lat[i], time.Since(t0))
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		tr.CloseIdleConnections()
		all := slices.Concat(lat...)
		slices.Sort(all)
		if len(all) == 0 {
			return fmt.Errorf("load %s: no successful request (%d failed)", target.what, fail.Load())
		}
		fmt.Printf("[%s] load %-18s %d conns %v: %8.0f req/s  ok %d  failed %d  p50 %v  p99 %v\n", mode, target.what+":", conc, dur,
			float64(ok.Load())/el.Seconds(), ok.Load(), fail.Load(), all[len(all)/2].Round(time.Microsecond), all[len(all)*99/100].Round(time.Microsecond))
	}
	return nil
}
