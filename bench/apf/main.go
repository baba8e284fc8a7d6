// Command apf shows what API Priority and Fairness does for a controller while one user
// floods the API server: it starts an in-process control plane (embedded etcd, the API
// server, no controllers), fills a namespace with ConfigMaps, then has --flooders
// goroutines of the user "flooder" list that namespace as fast as they can (global-default
// priority level) while one "controller" (system:kube-controller-manager, workload-high)
// gets one ConfigMap in a loop. It prints the controller's latency and the flood's
// throughput and 429s, idle and under the flood, with APF on and off.
//
//	go run ./bench/apf --flooders 200 --duration 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/controlplane"
)

type options struct {
	flooders int
	objects  int
	payload  int
	duration time.Duration
	seats    int
}

func main() {
	var o options
	flag.IntVar(&o.flooders, "flooders", 200, "concurrent list loops of the flooding user")
	flag.IntVar(&o.objects, "objects", 200, "ConfigMaps in the flooded namespace")
	flag.IntVar(&o.payload, "payload-bytes", 2048, "bytes of data in each ConfigMap")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long each phase lasts")
	flag.IntVar(&o.seats, "seats", 0, "APF server concurrency limit (0: upstream's 600)")
	flag.Parse()
	fmt.Printf("flooders=%d objects=%d payload=%dB duration=%s seats=%d\n", o.flooders, o.objects, o.payload, o.duration, o.seats)
	fmt.Printf("%-8s %-6s %12s %12s %12s %12s %14s %12s\n", "apf", "phase", "ctrl req/s", "ctrl p50", "ctrl p99", "ctrl max", "flood ok/s", "flood 429/s")
	for _, on := range []bool{true, false} {
		if err := run(o, on); err != nil {
			fmt.Fprintln(os.Stderr, "apf bench:", err)
			os.Exit(1)
		}
	}
}

func run(o options, apf bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "kubette-apf-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	seats := o.seats
	if !apf {
		seats = -1
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listener: ln, UnsafeNoFsync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlowControlSeats: seats})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() { cancel(); _ = cp.Wait() }()
	admin, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return err
	}
	adminClient, err := clientset(admin)
	if err != nil {
		return err
	}
	if _, err := adminClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flood"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	data := map[string]string{"k": strings.Repeat("x", o.payload)}
	for i := 0; i < o.objects; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: data}
		if _, err := adminClient.CoreV1().ConfigMaps("flood").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	user := func(name, user string, groups ...string) (*kubernetes.Clientset, error) {
		cfg, err := cp.ComponentConfig(name, user, groups...)
		if err != nil {
			return nil, err
		}
		return clientset(cfg)
	}
	flooder, err := user("flooder", "flooder")
	if err != nil {
		return err
	}
	ctrl, err := user("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	mode := "on"
	if !apf {
		mode = "off"
	}
	for _, phase := range []string{"idle", "flood"} {
		var ok, rejected atomic.Int64
		pctx, stop := context.WithTimeout(ctx, o.duration)
		var wg sync.WaitGroup
		if phase == "flood" {
			for i := 0; i < o.flooders; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for pctx.Err() == nil {
						err := flooder.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/flood/configmaps").MaxRetries(0).Do(pctx).Error()
						switch {
						case err == nil:
							ok.Add(1)
						case apierrors.IsTooManyRequests(err):
							rejected.Add(1)
						}
					}
				}()
			}
		}
		var lat []time.Duration
		for pctx.Err() == nil {
			t0 := time.Now()
			err := ctrl.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/flood/configmaps/cm-0").MaxRetries(0).Do(pctx).Error()
			if err != nil && pctx.Err() == nil {
				stop()
				wg.Wait()
				return fmt.Errorf("controller request: %w", err)
			}
			if pctx.Err() == nil {
				lat = append(lat, time.Since(t0))
			}
		}
		stop()
		wg.Wait()
		secs := o.duration.Seconds()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		pct := func(p float64) time.Duration {
			if len(lat) == 0 {
				return 0
			}
			return lat[int(float64(len(lat)-1)*p)]
		}
		fmt.Printf("%-8s %-6s %12.0f %12s %12s %12s %14.0f %12.0f\n", mode, phase, float64(len(lat))/secs,
			pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond),
			float64(ok.Load())/secs, float64(rejected.Load())/secs)
	}
	return nil
}

// clientset is a client without client-side throttling.
func clientset(cfg *rest.Config) (*kubernetes.Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfig(cfg)
}
