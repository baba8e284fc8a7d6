// Command dns measures kubette's cluster DNS server in process, with a real
// API server started in a temporary directory: how long the first index of N
// Services takes, how long a new Service takes to be answered, and queries
// per second over UDP on loopback for cluster names (ClusterIP A, headless A,
// SRV, NXDOMAIN) and for names forwarded to a fake upstream on loopback. It
// prints plain lines meant to be pasted into a report. No query leaves the
// host.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
	"github.com/kubette/kubette/internal/controlplane"
	kdns "github.com/kubette/kubette/internal/dns"
)

const ns = "default"

func main() {
	services := flag.Int("services", 1000, "ClusterIP Services created before the server starts")
	endpoints := flag.Int("headless-endpoints", 10, "ready endpoints of the headless Service")
	conc := flag.Int("concurrency", 16, "concurrent UDP clients")
	dur := flag.Duration("duration", 3*time.Second, "load duration per query kind")
	runs := flag.Int("runs", 5, "new Services timed until answered (median and max printed)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *services, *endpoints, *conc, *dur, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, services, endpoints, conc int, dur time.Duration, runs int) error {
	dir, err := os.MkdirTemp("", "dns-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	port, err := freePort()
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: filepath.Join(dir, "cp"), BindAddress: "127.0.0.1", Port: port, UnsafeNoFsync: true, Logger: quiet,
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

	if err := createServices(ctx, client, services, endpoints); err != nil {
		return err
	}
	upstream, stopUpstream, err := fakeUpstream()
	if err != nil {
		return err
	}
	defer stopUpstream()

	start := time.Now()
	srv, err := kdns.New(kdns.Options{Client: client, Addr: "127.0.0.1:0", Upstreams: []string{upstream}, Logger: quiet})
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	defer func() { cancel(); <-runErr }()
	select {
	case <-srv.Ready():
	case err := <-runErr:
		runErr <- err
		return fmt.Errorf("dns server: %w", err)
	}
	fmt.Printf("services %d, headless endpoints %d, concurrency %d\n", services, endpoints, conc)
	fmt.Printf("%-28s %s\n", "start to ready (first index)", benchutil.FormatDuration(time.Since(start)))
	addr := srv.Addr().String()

	var lat []time.Duration
	for i := range runs {
		name := "new-" + strconv.Itoa(i)
		t0 := time.Now()
		if _, err := client.CoreV1().Services(ns).Create(ctx, clusterIP(name, 60000+i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create service %s: %w", name, err)
		}
		for {
			m, err := ask(addr, name+"."+ns+".svc.cluster.local.", dns.TypeA)
			if err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) == 1 {
				break
			}
			if ctx.Err() != nil || time.Since(t0) > time.Minute {
				return fmt.Errorf("service %s not answered after %s", name, time.Since(t0))
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
	}
	lat = benchutil.Sorted(lat)
	fmt.Printf("%-28s median %s, max %s (create to answered, %d runs)\n", "new service visible", benchutil.FormatDuration(benchutil.Percentile(lat, 50)), benchutil.FormatDuration(lat[len(lat)-1]), runs)

	kinds := []struct {
		label string
		name  func(r *rand.Rand) string
		qtype uint16
		rcode int
	}{
		{"A clusterIP", func(r *rand.Rand) string {
			return "svc-" + strconv.Itoa(r.IntN(services)) + ".default.svc.cluster.local."
		}, dns.TypeA, dns.RcodeSuccess},
		{"SRV clusterIP", func(r *rand.Rand) string {
			return "_http._tcp.svc-" + strconv.Itoa(r.IntN(services)) + ".default.svc.cluster.local."
		}, dns.TypeSRV, dns.RcodeSuccess},
		{fmt.Sprintf("A headless (%d IPs)", endpoints), func(*rand.Rand) string { return "headless.default.svc.cluster.local." }, dns.TypeA, dns.RcodeSuccess},
		{"NXDOMAIN", func(r *rand.Rand) string {
			return "nope-" + strconv.Itoa(r.IntN(services)) + ".default.svc.cluster.local."
		}, dns.TypeA, dns.RcodeNameError},
		{"forwarded (loopback)", func(r *rand.Rand) string { return "host-" + strconv.Itoa(r.IntN(services)) + ".example.org." }, dns.TypeA, dns.RcodeSuccess},
	}
	for _, k := range kinds {
		qps, p50, p99, err := load(ctx, addr, conc, dur, k.name, k.qtype, k.rcode)
		if err != nil {
			return fmt.Errorf("%s: %w", k.label, err)
		}
		fmt.Printf("%-28s %8.0f queries/s  p50 %s  p99 %s\n", k.label, qps, benchutil.FormatDuration(p50), benchutil.FormatDuration(p99))
	}
	return nil
}

func clusterIP(name string, i int) *corev1.Service {
	ip := fmt.Sprintf("10.96.%d.%d", 1+i/250%250, 1+i%250)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

func createServices(ctx context.Context, client kubernetes.Interface, services, endpoints int) error {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range services {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := client.CoreV1().Services(ns).Create(ctx, clusterIP("svc-"+strconv.Itoa(i), i), metav1.CreateOptions{}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("create services: %w", err)
	}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "headless"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if _, err := client.CoreV1().Services(ns).Create(ctx, headless, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create headless service: %w", err)
	}
	name, port, ready := "http", int32(8080), true
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "headless-1", Labels: map[string]string{discoveryv1.LabelServiceName: "headless"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	for i := range endpoints {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.244.%d.%d", 1+i/250, 1+i%250)}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create endpointslice: %w", err)
	}
	return nil
}

// load runs conc clients, each with its own UDP socket, for dur and returns
// the answers per second and the median and 99th percentile latencies.
func load(ctx context.Context, addr string, conc int, dur time.Duration, name func(*rand.Rand) string, qtype uint16, rcode int) (float64, time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
			conn, err := c.Dial(addr)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer conn.Close()
			var mine []time.Duration
			var firstErr error
			for ctx.Err() == nil {
				req := new(dns.Msg)
				req.SetQuestion(name(r), qtype)
				t0 := time.Now()
				resp, _, err := c.ExchangeWithConn(req, conn)
				if err == nil && resp.Rcode != rcode {
					err = fmt.Errorf("%s: rcode %s", req.Question[0].Name, dns.RcodeToString[resp.Rcode])
				}
				if err != nil {
					firstErr = err
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			if firstErr != nil {
				errs = append(errs, firstErr)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	if len(all) == 0 {
		return 0, 0, 0, errors.New("no answers")
	}
	all = benchutil.Sorted(all)
	return float64(len(all)) / elapsed.Seconds(), benchutil.Percentile(all, 50), benchutil.Percentile(all, 99), nil
}

func ask(addr, name string, qtype uint16) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	resp, _, err := c.Exchange(req, addr)
	return resp, err
}

// fakeUpstream answers every A question with 192.0.2.1 over UDP on loopback.
func fakeUpstream() (string, func(), error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("fake upstream: %w", err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(req)
		resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		_ = w.WriteMsg(resp)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ActivateAndServe()
	}()
	return pc.LocalAddr().String(), func() { _ = srv.Shutdown(); <-done }, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
