package prober

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubette/kubette/internal/testenv/poll"
)

func TestRunHTTPHook(t *testing.T) {
	var mu sync.Mutex
	var paths, agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths, agents = append(paths, r.URL.RequestURI()), append(agents, r.UserAgent())
		mu.Unlock()
		if r.URL.Path == "/fail" {
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.URL)
	m := New(Config{KubeVersion: "1.32"})
	pod := &v1.Pod{}
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}

	// Any answer is a success, a 500 too, as upstream's hook runner.
	for _, path := range []string{"/hook?x=1", "/fail"} {
		if fb, err := m.RunHTTPHook(context.Background(), pod, c, &v1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}, host); err != nil || fb != "" {
			t.Errorf("GET %s: fallback %q err %v", path, fb, err)
		}
	}
	mu.Lock()
	if strings.Join(paths, " ") != "/hook?x=1 /fail" || agents[0] != "kube-lifecycle/1.32" {
		t.Errorf("requests %q with agents %q", paths, agents)
	}
	mu.Unlock()

	// No answer fails it.
	closed := poll.FreePort(t) // nothing listens on it
	if _, err := m.RunHTTPHook(context.Background(), pod, c, &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(closed)}, "127.0.0.1"); err == nil {
		t.Error("a refused connection did not fail the hook")
	}
	// No pod IP and no host fails it before dialling anything.
	if _, err := m.RunHTTPHook(context.Background(), pod, c, &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port)}, ""); err == nil {
		t.Error("a hook without a host or pod IP succeeded")
	}

	// An HTTPS hook answered in plain HTTP is retried over HTTP.
	fb, err := m.RunHTTPHook(context.Background(), pod, c, &v1.HTTPGetAction{Path: "/tls", Port: intstr.FromInt(port), Scheme: v1.URISchemeHTTPS}, host)
	if err != nil || !strings.Contains(fb, "got HTTP response, retry with HTTP succeeded") {
		t.Errorf("HTTPS to an HTTP server: fallback %q err %v", fb, err)
	}
}
