package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestIngressRoutesToPods is the classic nginx ingress flow on a real node: two Deployments
// behind Services, an Ingress routing by host and path, TLS from a Secret, the address in
// the Ingress's status, scaling seen by nginx, and routes gone with the Ingress.
func TestIngressRoutesToPods(t *testing.T) {
	needs.Binary(t, "nginx", "nginx")
	httpPort, httpsPort := freePort(t), freePort(t)
	nc := startNodeCluster(t, "--ingress=true", "--ingress-http-port", strconv.Itoa(httpPort), "--ingress-https-port", strconv.Itoa(httpsPort))
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	image := registry + "/kubette/server:v1"
	for _, d := range []string{"a", "b"} {
		nc.must(t, "create", "deployment", d, "--image="+image, "--replicas=1")
		nc.must(t, "expose", "deployment", d, "--port=80", "--target-port=8080")
	}
	nc.must(t, "rollout", "status", "deployment/a", "--timeout=90s")
	nc.must(t, "rollout", "status", "deployment/b", "--timeout=90s")

	certPEM, keyPEM := selfSigned(t, "a.example")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	nc.must(t, "create", "secret", "tls", "a-tls", "--cert="+certFile, "--key="+keyFile)
	applyJSON(t, nc.cluster, `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web",
	  "annotations":{"nginx.ingress.kubette.io/ssl-redirect":"false"}},"spec":{
	  "tls":[{"hosts":["a.example"],"secretName":"a-tls"}],
	  "rules":[{"host":"a.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"a","port":{"number":80}}}}]}},
	           {"host":"b.example","http":{"paths":[{"path":"/api","pathType":"Prefix","backend":{"service":{"name":"b","port":{"number":80}}}}]}}]}}`)

	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	if body := ingressGet(t, base+"/", "a.example", 200); !strings.Contains(body, "hostname=a-") {
		t.Errorf("a.example/ reached %q, want a pod of a", body)
	}
	if body := ingressGet(t, base+"/api/x", "b.example", 200); !strings.Contains(body, "hostname=b-") || !strings.Contains(body, "path=/api/x") {
		t.Errorf("b.example/api/x reached %q, want a pod of b", body)
	}
	ingressGet(t, base+"/other", "b.example", 404)

	// TLS with the Secret's certificate.
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(httpsPort), &tls.Config{ServerName: "a.example", InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to a.example: %v", err)
	}
	peer := conn.ConnectionState().PeerCertificates
	conn.Close()
	block, _ := pem.Decode(certPEM)
	if len(peer) == 0 || !bytesEqual(peer[0].Raw, block.Bytes) {
		t.Errorf("nginx did not answer a.example with the Secret's certificate")
	}

	// The address in the Ingress's status.
	if !poll(30*time.Second, func() bool {
		return nc.kubectl(t, "get", "ingress", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}").stdout != ""
	}) {
		t.Errorf("the Ingress has no address:\n%s", nc.must(t, "get", "ingress", "web", "-o", "yaml"))
	}

	// Scaling a spreads requests over its new pods. With nginx's Lua module the new
	// endpoints reach nginx through its control socket: no reload.
	_, luaErr := os.Stat("/usr/lib/nginx/modules/ngx_http_lua_module.so")
	errorLog := filepath.Join(nc.dataDir, "ingress", "logs", "error.log")
	reloadsBefore := countIn(t, errorLog, "reconfiguring")
	nc.must(t, "scale", "deployment", "a", "--replicas=3")
	nc.must(t, "rollout", "status", "deployment/a", "--timeout=90s")
	seen := map[string]bool{}
	poll(60*time.Second, func() bool {
		body := ingressGet(t, base+"/", "a.example", 200)
		if i := strings.Index(body, "hostname="); i >= 0 {
			seen[strings.Fields(body[i:])[0]] = true
		}
		return len(seen) >= 3
	})
	if len(seen) < 3 {
		t.Errorf("requests to a.example reached %d pods after scaling to 3: %v", len(seen), seen)
	}
	if luaErr == nil {
		if n := countIn(t, errorLog, "reconfiguring"); n != reloadsBefore {
			t.Errorf("nginx reloaded %d times while a scaled, want none (endpoints through Lua)", n-reloadsBefore)
		}
		backends, err := os.ReadFile(filepath.Join(nc.dataDir, "ingress", "conf", "backends"))
		if err != nil || !strings.Contains(string(backends), "default_a_80 ") || len(strings.Fields(lineWith(string(backends), "default_a_80 "))) != 4 {
			t.Errorf("conf/backends should list a's 3 endpoints: %q %v", backends, err)
		}
	}

	// Deleting the Ingress removes its routes.
	nc.must(t, "delete", "ingress", "web")
	ingressGet(t, base+"/", "a.example", 404)
}

// ingressGet requests url with a Host header until it answers with the wanted status.
func ingressGet(t *testing.T, url, host string, want int) string {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	var last string
	if poll(60*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		if resp.StatusCode == want {
			last = string(b)
			return true
		}
		return false
	}) {
		return last
	}
	t.Fatalf("GET %s (Host %s): want %d, last answer: %s", url, host, want, last)
	return ""
}

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// countIn counts the lines of file containing s.
func countIn(t *testing.T, file, s string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return strings.Count(string(b), s)
}

// lineWith returns the first line of text containing s.
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
