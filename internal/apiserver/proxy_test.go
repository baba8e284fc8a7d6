package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/hostaddr"
	kubeletserver "github.com/kubette/kubette/internal/kubelet/server"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
)

// proxyBackend answers what it was asked (method, path, query and whether credentials
// reached it), and on some paths an HTML page, a redirect or an unusual status.
func proxyBackend(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/page":
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<a href="/rewriteme">test</a>`)
	case "/moved":
		http.Redirect(w, r, "/target", http.StatusFound)
	case "/teapot":
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "short and stout")
	default:
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s?%s body=%s auth=%q tls=%v", r.Method, r.URL.Path, r.URL.RawQuery, body, r.Header.Get("Authorization"), r.TLS != nil)
	}
}

// hostIP is this machine's own address, which the API server may dial (a pod of a
// host-network pod has it); tests skip on a machine without one.
func hostIP(t *testing.T) net.IP {
	t.Helper()
	addr, err := hostaddr.DefaultRouteIPv4()
	if err != nil {
		t.Skipf("no address of this machine to serve a proxied backend on: %v", err)
	}
	return net.IP(addr.AsSlice())
}

// serveBackend serves proxyBackend on ip (over TLS when tlsOn) and returns its port.
func serveBackend(t *testing.T, ip net.IP, tlsOn bool) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(proxyBackend))
	srv.Listener.Close()
	srv.Listener = ln
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return ln.Addr().(*net.TCPAddr).Port
}

type proxyEnv struct {
	env    *testenv.Env
	client *http.Client // no redirects followed
	ip     net.IP
	port   int // plain HTTP backend
	tls    int // HTTPS backend
}

func startProxyEnv(t *testing.T) *proxyEnv {
	t.Helper()
	ip := hostIP(t)
	e := &proxyEnv{ip: ip, port: serveBackend(t, ip, false), tls: serveBackend(t, ip, true)}
	e.env = testenv.Start(t, testenv.Options{})
	c, err := rest.HTTPClientFor(e.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.client = c
	return e
}

// pod creates a running pod with ip whose container declares ports.
func (e *proxyEnv) pod(t *testing.T, name, ip string, ports ...int) {
	t.Helper()
	ctx := ctxT(t)
	ctr := corev1.Container{Name: "app", Image: "busybox"}
	for _, p := range ports {
		ctr.Ports = append(ctr.Ports, corev1.ContainerPort{ContainerPort: int32(p)})
	}
	p, err := e.env.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{ctr}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if ip != "" {
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	if _, err := e.env.Client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// do sends method to path on the API server and returns the code, the body and the header.
func (e *proxyEnv) do(t *testing.T, method, path, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, strings.TrimRight(e.env.Config.Host, "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), resp.Header
}

// statusOf sends GET path and decodes the Status it answers.
func (e *proxyEnv) statusOf(t *testing.T, path string) metav1.Status {
	t.Helper()
	code, body, h := e.do(t, "GET", path, "")
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %q (%s), want a Status", path, code, body, h.Get("Content-Type"))
	}
	if int(st.Code) != code {
		t.Errorf("GET %s: answered %d with a Status of code %d", path, code, st.Code)
	}
	return st
}

func TestPodProxy(t *testing.T) {
	e := startProxyEnv(t)
	e.pod(t, "web", e.ip.String(), e.port)
	e.pod(t, "loop", "127.0.0.1", e.port)
	e.pod(t, "elsewhere", "10.250.3.4", 80) // a pod of a simulated node: its address exists nowhere
	e.pod(t, "pending", "", 80)
	web := "/api/v1/namespaces/default/pods/web"
	withPort := "/api/v1/namespaces/default/pods/web:" + strconv.Itoa(e.port)
	tlsPort := "/api/v1/namespaces/default/pods/https:web:" + strconv.Itoa(e.tls)

	// Every method upstream proxies, with the path, the query and the body; the port is the
	// container's first when none is named.
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		code, body, _ := e.do(t, m, web+"/proxy/some/path?x=1&y=2", "hi")
		want := m + " /some/path?x=1&y=2 body=hi auth=\"\" tls=false"
		if code != 200 || body != want {
			t.Errorf("%s pods/web/proxy/some/path: %d %q, want 200 %q", m, code, body, want)
		}
	}
	if code, body, _ := e.do(t, "HEAD", withPort+"/proxy/x", ""); code != 200 || body != "" {
		t.Errorf("HEAD: %d %q", code, body)
	}
	if code, body, _ := e.do(t, "GET", tlsPort+"/proxy/secure/", ""); code != 200 || body != `GET /secure/? body= auth="" tls=true` {
		t.Errorf("https:web:port: %d %q", code, body)
	}
	// The root without its slash is redirected to it (GET and HEAD), keeping the query; the
	// other methods go to the backend.
	for _, m := range []string{"GET", "HEAD"} {
		code, _, h := e.do(t, m, withPort+"/proxy?method="+m, "")
		if code != http.StatusMovedPermanently || h.Get("Location") != withPort+"/proxy/?method="+m {
			t.Errorf("%s of the root without a slash: %d Location %q", m, code, h.Get("Location"))
		}
	}
	if code, body, _ := e.do(t, "POST", withPort+"/proxy?method=POST", ""); code != 200 || body != `POST /?method=POST body= auth="" tls=false` {
		t.Errorf("POST of the root: %d %q", code, body)
	}
	// Links of HTML pages and redirects are rewritten to go through the API server; other
	// answers pass as they are.
	if code, body, _ := e.do(t, "GET", withPort+"/proxy/page", ""); code != 200 || body != `<a href="`+withPort+`/proxy/rewriteme">test</a>` {
		t.Errorf("HTML page: %d %q", code, body)
	}
	if code, _, h := e.do(t, "GET", withPort+"/proxy/moved", ""); code != http.StatusFound || h.Get("Location") != withPort+"/proxy/target" {
		t.Errorf("redirect: %d Location %q", code, h.Get("Location"))
	}
	if code, body, _ := e.do(t, "GET", withPort+"/proxy/teapot", ""); code != http.StatusTeapot || body != "short and stout" {
		t.Errorf("teapot: %d %q", code, body)
	}
	// client-go's subresource request, as the DNS conformance tests read their results.
	got, err := e.env.Client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").SubResource("proxy").Name("web").Suffix("results", "a@b").DoRaw(ctxT(t))
	if err != nil || string(got) != `GET /results/a@b? body= auth="" tls=false` {
		t.Errorf("client-go pods/proxy: %q, %v", got, err)
	}

	// What cannot be reached is refused with a Status, before any dial.
	for _, c := range []struct {
		path string
		code int32
		msg  string
	}{
		{"/api/v1/namespaces/default/pods/loop/proxy/", 400, "address not allowed"},
		{"/api/v1/namespaces/default/pods/pending/proxy/", 400, "address not allowed"},
		{"/api/v1/namespaces/default/pods/elsewhere/proxy/", 503, `pod "elsewhere" has IP 10.250.3.4, which the API server does not reach`},
		{"/api/v1/namespaces/default/pods/nope/proxy/", 404, `pods "nope" not found`},
		{"/api/v1/namespaces/default/pods/ftp:web:21/proxy/", 400, `invalid pod request "ftp:web:21"`},
	} {
		st := e.statusOf(t, c.path)
		if st.Code != c.code || !strings.HasPrefix(st.Message, c.msg) {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, st.Code, st.Message, c.code, c.msg)
		}
	}
	// A backend that does not answer is 503, as upstream's "error trying to reach service".
	ln, err := net.Listen("tcp", net.JoinHostPort(e.ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	st := e.statusOf(t, "/api/v1/namespaces/default/pods/web:"+strconv.Itoa(refused)+"/proxy/")
	if st.Code != 503 || !strings.HasPrefix(st.Message, "error trying to reach service: ") {
		t.Errorf("a closed port: %d %q", st.Code, st.Message)
	}
}

func TestServiceProxy(t *testing.T) {
	e := startProxyEnv(t)
	ctx := ctxT(t)
	e.pod(t, "web", e.ip.String(), e.port)
	e.pod(t, "elsewhere", "10.250.3.4", 80)
	svcs := e.env.Client.CoreV1().Services("default")
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
			{Name: "tls", Port: 443, TargetPort: intstr.FromInt32(int32(e.tls))},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(int32(e.port))}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "far"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addr := func(pod, ip string) corev1.EndpointAddress {
		return corev1.EndpointAddress{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}}
	}
	for _, ep := range []*corev1.Endpoints{
		{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{addr("web", e.ip.String())},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: int32(e.port)}, {Name: "tls", Port: int32(e.tls)}},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{addr("web", e.ip.String())}, Ports: []corev1.EndpointPort{{Port: int32(e.port)}},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "far"}, Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{addr("elsewhere", "10.250.3.4")}, Ports: []corev1.EndpointPort{{Port: 80}},
		}}},
	} {
		if _, err := e.env.Client.CoreV1().Endpoints("default").Create(ctx, ep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	base := "/api/v1/namespaces/default/services/"
	for _, c := range []struct{ path, want string }{
		{"svc:http/proxy/a?b=c", `GET /a?b=c body= auth="" tls=false`},
		{"svc:80/proxy/a", `GET /a? body= auth="" tls=false`},
		{"http:svc:http/proxy/a", `GET /a? body= auth="" tls=false`},
		{"https:svc:tls/proxy/a", `GET /a? body= auth="" tls=true`},
		{"https:svc:443/proxy/a", `GET /a? body= auth="" tls=true`},
		{"plain/proxy/some/path/", `GET /some/path/? body= auth="" tls=false`},
	} {
		if code, body, _ := e.do(t, "GET", base+c.path, ""); code != 200 || body != c.want {
			t.Errorf("GET services/%s: %d %q, want %q", c.path, code, body, c.want)
		}
	}
	if code, body, _ := e.do(t, "DELETE", base+"plain/proxy/x", ""); code != 200 || body != `DELETE /x? body= auth="" tls=false` {
		t.Errorf("DELETE through the service: %d %q", code, body)
	}
	if code, _, h := e.do(t, "GET", base+"plain/proxy?method=GET", ""); code != http.StatusMovedPermanently || h.Get("Location") != base+"plain/proxy/?method=GET" {
		t.Errorf("the service's root without a slash: %d %q", code, h.Get("Location"))
	}
	for _, c := range []struct {
		path string
		code int32
		msg  string
	}{
		{"svc:81/proxy/", 503, `no service port 81 found for service "svc"`},
		{"svc:nope/proxy/", 503, `no endpoints available for service "svc:nope"`},
		{"empty/proxy/", 503, `no endpoints available for service "empty"`},
		{"far/proxy/", 503, `no endpoints available for service "far" that the API server reaches: [10.250.3.4] are on no network of this machine`},
		{"missing/proxy/", 404, `endpoints "missing" not found`},
	} {
		st := e.statusOf(t, base+c.path)
		if st.Code != c.code || st.Message != c.msg {
			t.Errorf("GET services/%s: %d %q, want %d %q", c.path, st.Code, st.Message, c.code, c.msg)
		}
	}
}

func TestNodeProxy(t *testing.T) {
	e := startProxyEnv(t)
	ctx := ctxT(t)
	ca, err := pki.LoadOrCreateCA(filepath.Join(filepath.Dir(e.env.Kubeconfig), "pki"), "unused")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kubeletserver.LoadOrIssueServing(ca, t.TempDir(), "node-1", []net.IP{e.ip})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kubeletserver.New(kubeletserver.Config{Logs: &cannedLogs{attempts: map[string][]string{}}, TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool()}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(e.ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet server: %v", err)
		}
	})
	kubeletPort := ln.Addr().(*net.TCPAddr).Port
	for name, ip := range map[string]string{"node-1": e.ip.String(), "loop": "127.0.0.1", "far": "10.250.0.9"} {
		n, err := e.env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(kubeletPort)
		if _, err := e.env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The kubelet, with the API server's kubelet client certificate.
	if code, body, _ := e.do(t, "GET", "/api/v1/nodes/node-1/proxy/healthz", ""); code != 200 || body != "ok" {
		t.Errorf("nodes/node-1/proxy/healthz: %d %q", code, body)
	}
	if code, body, _ := e.do(t, "GET", "/api/v1/nodes/node-1:"+strconv.Itoa(kubeletPort)+"/proxy/healthz", ""); code != 200 || body != "ok" {
		t.Errorf("nodes/node-1:kubeletport/proxy/healthz: %d %q", code, body)
	}
	// Another port of the node, with the scheme asked for.
	if code, body, _ := e.do(t, "GET", "/api/v1/nodes/node-1:"+strconv.Itoa(e.port)+"/proxy/x", ""); code != 200 || body != `GET /x? body= auth="" tls=false` {
		t.Errorf("nodes/node-1:port/proxy/x: %d %q", code, body)
	}
	for _, c := range []struct {
		path string
		code int32
		msg  string
	}{
		{"/api/v1/nodes/loop/proxy/healthz", 400, "address not allowed"},
		{"/api/v1/nodes/far/proxy/healthz", 503, `node "far" has address 10.250.0.9, which the API server does not reach`},
		{"/api/v1/nodes/nope/proxy/healthz", 404, `nodes "nope" not found`},
	} {
		st := e.statusOf(t, c.path)
		if st.Code != c.code || !strings.HasPrefix(st.Message, c.msg) {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, st.Code, st.Message, c.code, c.msg)
		}
	}
}

func TestProxySubresourcesInDiscovery(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	list, err := env.Client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pods/proxy": "PodProxyOptions", "services/proxy": "ServiceProxyOptions", "nodes/proxy": "NodeProxyOptions"}
	for _, r := range list.APIResources {
		kind, ok := want[r.Name]
		if !ok {
			continue
		}
		delete(want, r.Name)
		if r.Kind != kind || strings.Join(r.Verbs, ",") != "create,delete,get,patch,update" {
			t.Errorf("%s: kind %s verbs %v", r.Name, r.Kind, r.Verbs)
		}
	}
	if len(want) > 0 {
		t.Errorf("not in discovery: %v", want)
	}
}
