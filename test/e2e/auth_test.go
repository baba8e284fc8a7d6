package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TestAuthentication sends raw HTTPS requests: a bad bearer token is 401 with a Status;
// without credentials a request is system:anonymous (upstream's --anonymous-auth
// default), which the default policy lets read health checks and /version only; the
// admin certificate works.
func TestAuthentication(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)

	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", c.kubeconfig, err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.Clusters[kctx.Cluster] == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("kubeconfig %s has no complete current context %q", c.kubeconfig, cfg.CurrentContext)
	}
	server := cfg.Clusters[kctx.Cluster].Server
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.Clusters[kctx.Cluster].CertificateAuthorityData) {
		t.Fatalf("kubeconfig %s: certificate-authority-data holds no PEM certificate", c.kubeconfig)
	}
	anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	defer anonymous.CloseIdleConnections()

	get := func(client *http.Client, path string, header ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", server+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", server, path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s%s: read body: %v", server, path, err)
		}
		return resp, string(body)
	}

	t.Run("a bad bearer token is 401", func(t *testing.T) {
		resp, body := get(anonymous, "/api/v1/namespaces", "Authorization", "Bearer not-a-token")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /api/v1/namespaces with a bad token: status %d, want 401; body:\n%s", resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("401 Content-Type = %q, want application/json", ct)
		}
		var status struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
			Status     string `json:"status"`
			Message    string `json:"message"`
			Reason     string `json:"reason"`
			Code       int    `json:"code"`
		}
		if err := json.Unmarshal([]byte(body), &status); err != nil {
			t.Fatalf("401 body is not JSON (%v):\n%s", err, body)
		}
		if status.Kind != "Status" || status.APIVersion != "v1" || status.Status != "Failure" ||
			status.Reason != "Unauthorized" || status.Code != http.StatusUnauthorized || status.Message != "Unauthorized" {
			t.Errorf("401 body = %+v, want kind Status, apiVersion v1, status Failure, message and reason Unauthorized, code 401; body:\n%s", status, body)
		}
	})

	t.Run("health checks and version are public", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			resp, body := get(anonymous, path)
			if resp.StatusCode != http.StatusOK || body != "ok" {
				t.Errorf("GET %s without credentials: status %d body %q, want 200 \"ok\"", path, resp.StatusCode, body)
			}
		}
		if resp, body := get(anonymous, "/version"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"gitVersion"`) {
			t.Errorf("GET /version without credentials: status %d body %q", resp.StatusCode, body)
		}
	})

	t.Run("anonymous may do nothing else", func(t *testing.T) {
		for path, want := range map[string]string{
			"/api/v1/namespaces": `namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope`,
			"/api":               `forbidden: User \"system:anonymous\" cannot get path \"/api\"`,
		} {
			resp, body := get(anonymous, path)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
				t.Errorf("GET %s without credentials: status %d, want 403 with %s; body:\n%s", path, resp.StatusCode, want, body)
			}
		}
	})

	t.Run("admin certificate is accepted", func(t *testing.T) {
		user := cfg.AuthInfos[kctx.AuthInfo]
		cert, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData)
		if err != nil {
			t.Fatalf("kubeconfig client certificate: %v", err)
		}
		admin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
		}}
		defer admin.CloseIdleConnections()
		resp, body := get(admin, "/api/v1/namespaces")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"kind":"NamespaceList"`) || !strings.Contains(body, `"name":"kube-system"`) {
			t.Errorf("GET /api/v1/namespaces with the admin certificate: status %d, want 200 and a NamespaceList with kube-system; body:\n%s", resp.StatusCode, body)
		}
	})
}
