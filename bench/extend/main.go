// Command extend measures the API's extension points on an in-process control plane
// (embedded etcd, fsync off): the time from a CustomResourceDefinition's create to
// the first custom object accepted, custom-object creates against ConfigMap creates
// on the same run (rate and latency), and the latency one local validating webhook
// (TLS on loopback, reached through an ExternalName Service) adds to ConfigMap creates.
//
//	go run ./bench/extend [--objects 2000] [--workers 8] [--cpuprofile FILE]
//
// --cpuprofile writes a CPU profile of the custom-object phase (client and server
// share the process; the server's part is under internal/).
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/pki"
)

func main() {
	objects := flag.Int("objects", 2000, "objects created per phase")
	workers := flag.Int("workers", 8, "concurrent creators")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the custom-object phase to this file")
	flag.Parse()
	if err := run(*objects, *workers, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "extend bench:", err)
		os.Exit(1)
	}
}

func run(objects, workers int, cpuProfile string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "kubette-extend-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listener: ln, UnsafeNoFsync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() { cancel(); _ = cp.Wait() }()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100000, 100000
	kc := kubernetes.NewForConfigOrDie(cfg)
	fmt.Printf("objects=%d workers=%d\n", objects, workers)

	// CRD create -> first custom object accepted.
	start := time.Now()
	if err := createCRD(ctx, cfg); err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "widgets"}
	widgets := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace("default")
	for {
		if _, err := widgets.Create(ctx, widget("first"), metav1.CreateOptions{}); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("no custom object accepted within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("%-28s %s\n", "CRD create -> first object", benchutil.FormatDuration(time.Since(start)))

	fmt.Printf("%-28s %10s %10s %10s\n", "phase", "creates/s", "p50", "p99")
	phase := func(name string, create func(i int) error) error {
		rate, p50, p99, err := measure(objects, workers, create)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("%-28s %10.0f %10s %10s\n", name, rate, benchutil.FormatDuration(p50), benchutil.FormatDuration(p99))
		return nil
	}
	configMap := func(prefix string) func(i int) error {
		return func(i int) error {
			_, err := kc.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}, Data: map[string]string{"size": "1"}}, metav1.CreateOptions{})
			return err
		}
	}
	if err := phase("ConfigMap", configMap("cm")); err != nil {
		return err
	}
	stopProfile, err := startProfile(cpuProfile)
	if err != nil {
		return err
	}
	err = phase("custom object (Widget)", func(i int) error {
		_, err := widgets.Create(ctx, widget(fmt.Sprintf("w-%d", i)), metav1.CreateOptions{})
		return err
	})
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	calls, err := startWebhook(ctx, kc)
	if err != nil {
		return err
	}
	if err := phase("ConfigMap + 1 webhook", configMap("hooked")); err != nil {
		return err
	}
	if calls.Load() < int64(objects) {
		return fmt.Errorf("the webhook saw %d of %d creates", calls.Load(), objects)
	}
	return nil
}

// startProfile starts a CPU profile into path (nothing when path is empty) and
// returns the function that stops it and closes the file.
func startProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// measure creates n objects from workers goroutines and returns the rate and the
// latency percentiles.
func measure(n, workers int, create func(i int) error) (float64, time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if err := create(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, 0, firstErr
	}
	elapsed := time.Since(start)
	sorted := benchutil.Sorted(lat)
	return float64(n) / elapsed.Seconds(), benchutil.Percentile(sorted, 0.50), benchutil.Percentile(sorted, 0.99), nil
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1), "color": "blue"}}}
	u.SetAPIVersion("bench.example.com/v1")
	u.SetKind("Widget")
	u.SetName(name)
	return u
}

func createCRD(ctx context.Context, cfg *rest.Config) error {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.bench.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "bench.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "integer"}, "color": {Type: "string"}}}}}}}},
		},
	}
	_, err := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	return err
}

// startWebhook serves an always-allowing validating webhook on loopback behind the
// ExternalName Service default/bench-hook, registers it for ConfigMaps named
// hooked-*, and waits until it is called. It returns the webhook's call count.
func startWebhook(ctx context.Context, kc kubernetes.Interface) (*atomic.Int64, error) {
	dir, err := os.MkdirTemp("", "kubette-extend-bench-ca-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ca, err := pki.LoadOrCreateCA(dir, "bench-webhook-ca")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertSpec{CommonName: "bench-hook", DNSNames: []string{"bench-hook.default.svc"}, Server: true})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		return nil, err
	}
	calls := &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	if _, err := kc.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-hook"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: []corev1.ServicePort{{Port: port}}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	none, path := admissionregistrationv1.SideEffectClassNone, "/validate"
	if _, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-hook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "bench-hook.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.CertPEM,
				Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "bench-hook", Path: &path, Port: &port}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "hooked", Expression: "object.metadata.name.startsWith('hooked-')"}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for i := 0; calls.Load() == 0; i++ {
		if i > 3000 {
			return nil, fmt.Errorf("the webhook was never called")
		}
		name := fmt.Sprintf("hooked-probe-%d", i)
		if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	calls.Store(0)
	return calls, nil
}
