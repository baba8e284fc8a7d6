package sim

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// portSim is a simulator whose pod cache holds pods, for the kubelet port's handler; nothing
// reaches an API server.
func portSim(t *testing.T, pods ...*podInfo) *Sim {
	t.Helper()
	s, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range pods {
		if err := s.indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	close(s.podsSynced)
	return s
}

var started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func simPod(s *Sim, name string, phase corev1.PodPhase) *podInfo {
	p := &podInfo{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		phase:      phase, startTime: started, exitAfter: 3 * time.Second,
		initContainers: []containerInfo{{name: "init", image: "busybox"}},
		containers:     []containerInfo{{name: "app", image: "nginx:1"}, {name: "side", image: "envoy"}},
	}
	if s != nil {
		p.node = s.nodes[0]
	}
	return p
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func statusMessage(t *testing.T, body string) string {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("body %q: want a Status (%v)", body, err)
	}
	return st.Message
}

func TestKubeletPortLogs(t *testing.T) {
	s := portSim(t)
	for _, p := range []*podInfo{simPod(s, "running", corev1.PodRunning), simPod(s, "done", corev1.PodSucceeded), simPod(s, "pending", corev1.PodPending), simPod(nil, "elsewhere", corev1.PodRunning)} {
		if p.Name == "pending" {
			p.startTime = time.Time{}
		}
		if err := s.indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	h := s.kubeletHandler()
	startLine := "[kubette sim] container app (image nginx:1) of pod ns/running started on simulated node sim-node-0; a simulated container runs no process, so it prints nothing of its own\n"

	code, body := get(t, h, "/containerLogs/ns/running/app")
	if code != http.StatusOK || body != startLine {
		t.Fatalf("running: %d %q, want 200 %q", code, body, startLine)
	}
	code, body = get(t, h, "/containerLogs/ns/running/app?timestamps=true")
	if want := "2026-01-02T03:04:05Z " + startLine; code != http.StatusOK || body != want {
		t.Fatalf("timestamps: %d %q, want %q", code, body, want)
	}
	code, body = get(t, h, "/containerLogs/ns/done/app")
	if want := "started on simulated node sim-node-0"; code != http.StatusOK || !strings.Contains(body, want) ||
		!strings.HasSuffix(body, "\n[kubette sim] container app exited with code 0\n") {
		t.Fatalf("succeeded: %d %q: want the start and exit lines", code, body)
	}
	code, body = get(t, h, "/containerLogs/ns/done/app?tailLines=1&timestamps=1")
	if want := "2026-01-02T03:04:08Z [kubette sim] container app exited with code 0\n"; code != http.StatusOK || body != want {
		t.Fatalf("tailLines=1: %d %q, want %q", code, body, want)
	}
	if code, body = get(t, h, "/containerLogs/ns/done/app?tailLines=0"); code != http.StatusOK || body != "" {
		t.Fatalf("tailLines=0: %d %q, want nothing", code, body)
	}
	if code, body = get(t, h, "/containerLogs/ns/running/init"); code != http.StatusOK || !strings.HasSuffix(body, "container init exited with code 0\n") {
		t.Fatalf("init container: %d %q: want its exit", code, body)
	}
	if code, body = get(t, h, "/containerLogs/ns/running/app?limitBytes=12"); code != http.StatusOK || body != startLine[:12] {
		t.Fatalf("limitBytes=12: %d %q", code, body)
	}
	if code, body = get(t, h, "/containerLogs/ns/done/app?sinceTime=2026-01-02T03:04:06Z"); code != http.StatusOK || body != "[kubette sim] container app exited with code 0\n" {
		t.Fatalf("sinceTime: %d %q: want only the exit line", code, body)
	}

	for path, want := range map[string]struct {
		code int
		msg  string
	}{
		"/containerLogs/ns/pending/app":                                               {400, `container "app" in pod "pending" is waiting to start: ContainerCreating`},
		"/containerLogs/ns/running/app?previous=true":                                 {400, `previous terminated container "app" in pod "running" not found`},
		"/containerLogs/ns/running/nope":                                              {404, `container "nope" not found in pod "running"`},
		"/containerLogs/ns/elsewhere/app":                                             {404, `pod "elsewhere" does not exist`},
		"/containerLogs/ns/missing/app":                                               {404, `pod "missing" does not exist`},
		"/containerLogs/ns/running/app?tailLines=-1":                                  {400, "tailLines: Invalid value: -1: must be greater than or equal to 0"},
		"/containerLogs/ns/running/app?limitBytes=0":                                  {400, "limitBytes: Invalid value: 0: must be greater than 0"},
		"/containerLogs/ns/running/app?sinceSeconds=0":                                {400, "sinceSeconds: Invalid value: 0: must be greater than 0"},
		"/containerLogs/ns/running/app?follow=maybe":                                  {400, `follow: invalid boolean "maybe"`},
		"/containerLogs/ns/running/app?sinceSeconds=1&sinceTime=2026-01-02T03:04:06Z": {400, "at most one of `sinceTime` or `sinceSeconds` may be specified"},
	} {
		code, body := get(t, h, path)
		if code != want.code || statusMessage(t, body) != want.msg {
			t.Errorf("%s: %d %q, want %d %q", path, code, body, want.code, want.msg)
		}
	}
}

func TestKubeletPortStreamingSaysSimulated(t *testing.T) {
	s := portSim(t, simPod(nil, "x", corev1.PodRunning))
	p := simPod(s, "running", corev1.PodRunning)
	if err := s.indexer.Add(p); err != nil {
		t.Fatal(err)
	}
	h := s.kubeletHandler()
	for _, path := range []string{"/exec/ns/running/app?command=ls&output=1", "/attach/ns/running/app?output=1", "/portForward/ns/running?ports=80", "/exec/ns/running/uid-running/app?command=ls"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if msg := statusMessage(t, rec.Body.String()); rec.Code != http.StatusBadRequest || !strings.Contains(msg, "pod ns/running runs on simulated node sim-node-0 (kubette sim), which runs no containers") {
				t.Errorf("%s %s: %d %q: want 400 saying the node is simulated", method, path, rec.Code, msg)
			}
		}
	}
	if code, body := get(t, h, "/exec/ns/running/nope?command=ls"); code != http.StatusNotFound || statusMessage(t, body) != `container "nope" not found in pod "running"` {
		t.Errorf("exec of a missing container: %d %q", code, body)
	}
	if code, _ := get(t, h, "/exec/ns/x/app?command=ls"); code != http.StatusNotFound {
		t.Errorf("exec in a pod of another node: %d, want 404", code)
	}
	if code, _ := get(t, h, "/pods"); code != http.StatusNotFound {
		t.Errorf("/pods: %d, want 404", code)
	}
}

func TestKubeletPortBeforeSync(t *testing.T) {
	s, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, s.kubeletHandler(), "/containerLogs/ns/p/c"); code != http.StatusServiceUnavailable {
		t.Fatalf("before the pod cache synced: %d, want 503", code)
	}
}

// TestKubeletPortFollow follows a running container's log: the start line comes at once,
// the exit line once the pod Succeeded, and then the stream ends.
func TestKubeletPortFollow(t *testing.T) {
	s := portSim(t)
	p := simPod(s, "job", corev1.PodRunning)
	if err := s.indexer.Add(p); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.kubeletHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/containerLogs/ns/job/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || !strings.Contains(first, "container app (image nginx:1) of pod ns/job started") {
		t.Fatalf("first line %q (%v)", first, err)
	}
	done := *p
	done.phase = corev1.PodSucceeded
	if err := s.indexer.Update(&done); err != nil {
		t.Fatal(err)
	}
	rest, err := readAll(r, 10*time.Second)
	if err != nil || rest != "[kubette sim] container app exited with code 0\n" {
		t.Fatalf("after the pod succeeded: %q (%v): want the exit line, then the end", rest, err)
	}
}

func readAll(r *bufio.Reader, timeout time.Duration) (string, error) {
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- result{string(b), err}
	}()
	select {
	case res := <-ch:
		return res.s, res.err
	case <-time.After(timeout):
		return "", errTimeout
	}
}

var errTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string { return "timed out: the stream did not end" }
