package ingress

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"

	"github.com/kubette/kubette/internal/hostaddr"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// backend is a plain HTTP server answering its name, on ip: a local
// address, as the API rejects loopback endpoint addresses.
func backend(t *testing.T, ip, name string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
		if n > 0 {
			fmt.Fprintf(w, " %d", n)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

type harness struct {
	t         *testing.T
	client    kubernetes.Interface
	httpPort  int
	httpsPort int
	http      *http.Client
}

// get sends GET path with Host host to nginx's HTTP port.
func (h *harness) get(host, path string) (int, string, http.Header, error) {
	req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", h.httpPort, path), nil)
	if err != nil {
		return 0, "", nil, err
	}
	req.Host = host
	resp, err := h.http.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

// expect waits until GET host+path answers code (and, when body is not
// empty, a body starting with it).
func (h *harness) expect(host, path string, code int, body string) {
	h.t.Helper()
	poll.Until(h.t, fmt.Sprintf("GET %s%s -> %d %q", host, path, code, body), func() error {
		c, b, _, err := h.get(host, path)
		if err != nil {
			return err
		}
		if c != code || !strings.HasPrefix(b, body) {
			return fmt.Errorf("got %d %q", c, b)
		}
		return nil
	})
}

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}},
	}
}

func slice(name, ip string, port int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	// One slice per backend: they all listen on the same address.
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(port))}}
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}}
	return s
}

func ptr[T any](v T) *T { return &v }

func prefix(p, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: ptr(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}},
	}}
}

func ingressObj(name string, ann map[string]string, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr(DefaultClassName), Rules: rules},
	}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte, der []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), der
}

// TestIntegration runs the controller with the real nginx and API server,
// once with endpoints through the Lua balancer and once through reloads.
func TestIntegration(t *testing.T) {
	bin := needs.Binary(t, "nginx", "nginx")
	needs.Root(t) // nginx's master opens its logs and switches workers to nobody
	t.Run("lua", func(t *testing.T) {
		needsLua(t, bin)
		testIntegration(t, bin, EndpointsLua)
	})
	// Without a usable Lua module, auto falls back to reloads.
	t.Run("reload", func(t *testing.T) { testIntegration(t, bin, EndpointsAuto) })
}

func testIntegration(t *testing.T, bin, mode string) {
	// Backends listen on this host's own address (traffic to it stays on
	// the host): the API rejects loopback endpoint addresses.
	hostAddr, hostErr := hostaddr.DefaultRouteIPv4()
	if hostErr != nil {
		t.Skipf("no local non-loopback IPv4 address for the backends: %v", hostErr)
	}
	hostIP := hostAddr.String()
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	client := env.Client
	h := &harness{t: t, client: client, httpPort: poll.FreePort(t), httpsPort: poll.FreePort(t),
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	const publishIP = "192.0.2.10"
	var moduleDirs []string // the default ones
	if mode != EndpointsLua {
		moduleDirs = []string{t.TempDir()} // no module there
	}
	c, err := New(Options{
		Client: client, DataDir: t.TempDir(), NginxBinary: bin, HTTPPort: h.httpPort, HTTPSPort: h.httpsPort,
		ListenAddress: "127.0.0.1", PublishIP: publishIP, WorkerProcesses: "1", MinSyncPeriod: 20 * time.Millisecond,
		EndpointUpdates: mode, LuaModuleDirs: moduleDirs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// breakReload, once armed, removes the certificates between the check
	// and the reload of the first configuration that loads fragile's
	// certificate: `nginx -t` accepted it, the reload cannot load it. (A
	// reload of another change meanwhile, or of fragile seen before its
	// Secret, must not take the failure.)
	var breakReload atomic.Bool
	c.beforeReload = func() {
		if !breakReload.Load() {
			return
		}
		if conf, err := os.ReadFile(c.proc.Conf); err != nil || !bytes.Contains(conf, []byte("_fragile-cert-")) {
			return
		}
		if !breakReload.Swap(false) {
			return
		}
		files, _ := filepath.Glob(filepath.Join(c.prefix, "certs", "*.pem"))
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	if err := c.EnsureClass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureClass(ctx); err != nil {
		t.Fatalf("EnsureClass twice: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	var nginxPid int
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() {
		if runCtx.Err() == nil {
			stop()
		}
	})

	portA, portB := backend(t, hostIP, "a1"), backend(t, hostIP, "b")
	for _, o := range []*corev1.Service{service("a"), service("b")} {
		if _, err := client.CoreV1().Services(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*discoveryv1.EndpointSlice{slice("a", hostIP, portA), slice("b", hostIP, portB)} {
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ab := ingressObj("ab", nil, rule("a.example", prefix("/", "a")), rule("b.example", prefix("/api", "b"), prefix("/gone", "missing")))
	if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ab, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("routes", func(t *testing.T) {
		h.t = t
		h.expect("a.example", "/", 200, "a1 /")
		if got := c.Stats().Lua; got != (mode == EndpointsLua) {
			t.Errorf("Stats().Lua = %v in mode %s", got, mode)
		}
		h.expect("b.example", "/api", 200, "b /api")
		h.expect("b.example", "/api/x", 200, "b /api/x")
		h.expect("b.example", "/apix", 404, "")
		h.expect("b.example", "/other", 404, "")
		h.expect("unknown.example", "/", 404, "")
		h.expect("b.example", "/gone/x", 503, "")
		waitEvent(t, client, "ab", ReasonMissingService)
	})

	t.Run("status", func(t *testing.T) {
		poll.Until(t, "status address", func() error {
			ing, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "ab", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != publishIP {
				return fmt.Errorf("status %+v", lb)
			}
			return nil
		})
	})

	t.Run("tls", func(t *testing.T) {
		h.t = t
		certPEM, keyPEM, der := selfSigned(t, "secure.example")
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "secure-cert", Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		if _, err := client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ing := ingressObj("secure", nil, rule("secure.example", prefix("/", "a")))
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"secure.example"}, SecretName: "secure-cert"}}
		if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "HTTPS with the secret's certificate", func() error {
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", h.httpsPort), &tls.Config{ServerName: "secure.example", InsecureSkipVerify: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			peer := conn.ConnectionState().PeerCertificates
			if len(peer) == 0 || string(peer[0].Raw) != string(der) {
				return fmt.Errorf("peer certificate is not the secret's")
			}
			fmt.Fprintf(conn, "GET /s HTTP/1.1\r\nHost: secure.example\r\nConnection: close\r\n\r\n")
			b, err := io.ReadAll(conn)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(string(b), "HTTP/1.1 200") || !strings.HasSuffix(string(b), "a1 /s") {
				return fmt.Errorf("answer %q", b)
			}
			return nil
		})
		poll.Until(t, "HTTP redirects to HTTPS", func() error {
			code, _, hdr, err := h.get("secure.example", "/p?q=1")
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("https://secure.example:%d/p?q=1", h.httpsPort); code != 308 || hdr.Get("Location") != want {
				return fmt.Errorf("got %d %q, want 308 %q", code, hdr.Get("Location"), want)
			}
			return nil
		})
	})

	t.Run("endpoint added spreads requests", func(t *testing.T) {
		// nginx serves a new configuration before the controller has confirmed
		// and counted its reload: wait until the last subtest's is counted.
		poll.Until(t, "the controller idle", func() error {
			if !c.Stats().Idle {
				return errors.New("a sync runs or waits")
			}
			return nil
		})
		before := c.Stats()
		extra := slice("a-2", hostIP, backend(t, hostIP, "a2"))
		extra.Labels[discoveryv1.LabelServiceName] = "a"
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, extra, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "both endpoints answer", func() error {
			seen := map[string]bool{}
			for range 20 {
				_, b, _, err := h.get("a.example", "/")
				if err != nil {
					return err
				}
				seen[strings.Fields(b)[0]] = true
			}
			if !seen["a1"] || !seen["a2"] {
				return fmt.Errorf("answered by %v", seen)
			}
			return nil
		})
		// nginx's new workers can answer before the controller has
		// confirmed the reload (a fresh connection served the new config
		// id) and counted it, so the counters are awaited too.
		poll.Until(t, "the change counted as its mode says", func() error {
			after := c.Stats()
			switch mode {
			case EndpointsLua:
				if after.Reloads != before.Reloads || after.EndpointPushes == before.EndpointPushes {
					return fmt.Errorf("with Lua an endpoint change is pushed without a reload: reloads %d -> %d, pushes %d -> %d",
						before.Reloads, after.Reloads, before.EndpointPushes, after.EndpointPushes)
				}
			default:
				if after.Reloads == before.Reloads || after.EndpointPushes != 0 {
					return fmt.Errorf("without Lua an endpoint change reloads: reloads %d -> %d, pushes %d", before.Reloads, after.Reloads, after.EndpointPushes)
				}
			}
			return nil
		})
	})

	t.Run("endpoints gone answer 503, back answer again", func(t *testing.T) {
		h.t = t
		if err := client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.expect("b.example", "/api/x", 503, "")
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("b", hostIP, portB), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.expect("b.example", "/api/x", 200, "b /api/x")
	})

	t.Run("failed reload is reported and retried", func(t *testing.T) {
		h.t = t
		certPEM, keyPEM, der := selfSigned(t, "fragile.example")
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "fragile-cert", Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		if _, err := client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		failed := c.Stats().FailedReloads
		breakReload.Store(true)
		ing := ingressObj("fragile", nil, rule("fragile.example", prefix("/", "a")))
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"fragile.example"}, SecretName: "fragile-cert"}}
		if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, client, "fragile", ReasonReloadFailed)
		if got := c.Stats().FailedReloads; got <= failed {
			t.Errorf("FailedReloads %d, want more than %d", got, failed)
		}
		// The retry rewrites the certificates and the reload takes.
		poll.Until(t, "fragile.example over HTTPS after the retry", func() error {
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", h.httpsPort), &tls.Config{ServerName: "fragile.example", InsecureSkipVerify: true})
			if err != nil {
				return err
			}
			defer conn.Close()
			if peer := conn.ConnectionState().PeerCertificates; len(peer) == 0 || string(peer[0].Raw) != string(der) {
				return fmt.Errorf("peer certificate is not the secret's")
			}
			return nil
		})
		h.expect("a.example", "/", 200, "a")
	})

	t.Run("large body within proxy-body-size", func(t *testing.T) {
		ing := ingressObj("upload", map[string]string{AnnotationProxyBodySize: "8m"}, rule("upload.example", prefix("/", "a")))
		if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		post := func(host string) (int, string, error) {
			req, err := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/up", h.httpPort), strings.NewReader(strings.Repeat("x", 3<<20)))
			if err != nil {
				return 0, "", err
			}
			req.Host = host
			resp, err := h.http.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}
		poll.Until(t, "3 MiB POST through upload.example", func() error {
			code, body, err := post("upload.example")
			if err == nil && (code != 200 || !strings.HasSuffix(body, fmt.Sprintf(" /up %d", 3<<20))) {
				err = fmt.Errorf("got %d %q", code, body)
			}
			return err
		})
		// a.example keeps nginx's default limit of 1 MiB.
		if code, _, err := post("a.example"); err == nil && code != http.StatusRequestEntityTooLarge {
			t.Errorf("3 MiB POST to a.example: %d, want 413", code)
		}
	})

	t.Run("bad annotation", func(t *testing.T) {
		h.t = t
		ing := ingressObj("bad", map[string]string{AnnotationProxyReadTimeout: "soon"}, rule("bad.example", prefix("/", "a")))
		if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, client, "bad", ReasonInvalidAnnotation)
		h.expect("bad.example", "/", 404, "")
		h.expect("a.example", "/", 200, "a")
	})

	t.Run("config nginx rejects is never applied", func(t *testing.T) {
		h.t = t
		ing := ingressObj("huge", map[string]string{AnnotationProxyBodySize: "99999999999999999999g"}, rule("huge.example", prefix("/", "a")))
		if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, client, "huge", ReasonRejected)
		conf, err := os.ReadFile(c.ConfPath())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(conf), "99999999999999999999g") || strings.Contains(string(conf), "huge.example") {
			t.Fatalf("the rejected configuration was installed")
		}
		h.expect("huge.example", "/", 404, "")
		h.expect("a.example", "/", 200, "a")
		// Later changes still apply.
		later := ingressObj("later", nil, rule("later.example", prefix("/", "b")))
		if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, later, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.expect("later.example", "/l", 200, "b /l")
		poll.Until(t, "no status on the rejected Ingress", func() error {
			ing, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "huge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(ing.Status.LoadBalancer.Ingress) != 0 {
				return fmt.Errorf("status %+v", ing.Status.LoadBalancer.Ingress)
			}
			return nil
		})
	})

	t.Run("nginx restarted when it dies", func(t *testing.T) {
		h.t = t
		pid := c.NginxPid()
		if pid == 0 {
			t.Fatal("no nginx running")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "a new master", func() error {
			if p := c.NginxPid(); p == 0 || p == pid {
				return fmt.Errorf("pid %d", p)
			}
			return nil
		})
		h.expect("a.example", "/", 200, "a")
	})

	t.Run("other class clears status", func(t *testing.T) {
		// The controller may be writing this Ingress's status meanwhile: retry on conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ing, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "later", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ing.Spec.IngressClassName = ptr("someone-else")
			_, err = client.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		h.t = t
		h.expect("later.example", "/", 404, "")
		poll.Until(t, "status cleared", func() error {
			ing, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "later", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(ing.Status.LoadBalancer.Ingress) != 0 {
				return fmt.Errorf("status %+v", ing.Status.LoadBalancer.Ingress)
			}
			return nil
		})
	})

	t.Run("deleted Ingress loses its routes", func(t *testing.T) {
		h.t = t
		if err := client.NetworkingV1().Ingresses(ns).Delete(ctx, "ab", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.expect("a.example", "/", 404, "")
		h.expect("b.example", "/api/x", 404, "")
		h.expect("secure.example", "/", 308, "")
	})

	nginxPid = c.NginxPid()
	stop()
	if nginxPid != 0 {
		if err := syscall.Kill(nginxPid, 0); err == nil {
			t.Errorf("nginx (pid %d) still runs after Run returned", nginxPid)
		}
	}
}

func waitEvent(t *testing.T, client kubernetes.Interface, name, reason string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("Warning %s on ingress %s", reason, name), func() error {
		evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Ingress" && e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("not yet among %d events", len(evs.Items))
	})
}
