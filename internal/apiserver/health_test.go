package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/testenv"
)

func getRaw(t *testing.T, c *http.Client, url string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

// TestHealthVersionAndUnknownPaths checks small upstream behaviours: the health endpoints'
// verbose and per-check answers, /version's build fields, and the 404 of a subresource no
// resource has.
func TestHealthVersionAndUnknownPaths(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimRight(env.Config.Host, "/")
	for _, ep := range []string{"healthz", "livez", "readyz"} {
		if code, body, _ := getRaw(t, c, host+"/"+ep); code != 200 || body != "ok" {
			t.Errorf("/%s: %d %q", ep, code, body)
		}
		want := "[+]ping ok\n[+]etcd ok\n"
		if ep == "readyz" {
			want += "[+]watch-caches ok\n"
		}
		if code, body, _ := getRaw(t, c, host+"/"+ep+"?verbose"); code != 200 || body != want+ep+" check passed\n" {
			t.Errorf("/%s?verbose: %d %q", ep, code, body)
		}
		want = "[+]ping ok\n[+]etcd excluded: ok\n"
		if ep == "readyz" {
			want += "[+]watch-caches ok\n"
		}
		want += `warn: some health checks cannot be excluded: no matches for "nope"` + "\n"
		if code, body, _ := getRaw(t, c, host+"/"+ep+"?verbose&exclude=etcd&exclude=nope"); code != 200 || body != want+ep+" check passed\n" {
			t.Errorf("/%s?verbose&exclude: %d %q", ep, code, body)
		}
		if code, body, _ := getRaw(t, c, host+"/"+ep+"/etcd"); code != 200 || body != "ok" {
			t.Errorf("/%s/etcd: %d %q", ep, code, body)
		}
		if code, _, _ := getRaw(t, c, host+"/"+ep+"/nope"); code != 404 {
			t.Errorf("/%s/nope: %d, want 404", ep, code)
		}
	}

	code, body, _ := getRaw(t, c, host+"/version")
	var v version.Info
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("/version: %d %q %v", code, body, err)
	}
	if v.GoVersion != runtime.Version() || v.Compiler != runtime.Compiler || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Major != "1" {
		t.Errorf("/version = %+v", v)
	}

	// A subresource the resource does not have: upstream's answer for a path no route
	// serves, whether or not the object exists.
	if _, err := env.Client.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "exists"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/v1/namespaces/default/bogus", "/api/v1/namespaces/default/configmaps/exists/bogus", "/api/v1/namespaces/default/configmaps/nope/bogus"} {
		code, body, ct := getRaw(t, c, host+p)
		var st metav1.Status
		if err := json.Unmarshal([]byte(body), &st); code != 404 || err != nil || ct != "application/json" ||
			st.Message != "the server could not find the requested resource" || st.Reason != metav1.StatusReasonNotFound || st.Details == nil || st.Details.Name != "" || st.Details.Kind != "" {
			t.Errorf("GET %s: %d %s %q", p, code, ct, body)
		}
	}
}
