package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/pki"
)

// fakeLogs is a LogLocator over a map of "ns/pod/container" to attempt files (oldest first).
type fakeLogs struct {
	mu       sync.Mutex
	attempts map[string][]string
	waiting  map[string]string // key → error text for a container that has not started
}

func (f *fakeLogs) set(key string, paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[key] = paths
}

func (f *fakeLogs) ContainerLogs(ns, pod, ctr string, previous bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if msg, ok := f.waiting[ns+"/"+pod+"/"+ctr]; ok {
		return "", fmt.Errorf("%s", msg)
	}
	found := false
	for k := range f.attempts {
		if strings.HasPrefix(k, ns+"/"+pod+"/") {
			found = true
		}
	}
	if !found {
		return "", fmt.Errorf("pod %s/%s: %w", ns, pod, ErrPodNotFound)
	}
	paths, ok := f.attempts[ns+"/"+pod+"/"+ctr]
	if !ok {
		return "", fmt.Errorf("container %s: %w", ctr, ErrContainerNotFound)
	}
	if previous {
		if len(paths) < 2 {
			return "", fmt.Errorf("container %s: %w", ctr, ErrNoPreviousContainer)
		}
		return paths[len(paths)-2], nil
	}
	return paths[len(paths)-1], nil
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// writeLog writes CRI log lines; each line is "stream tag text" and gets t0 + its index in seconds.
func writeLog(t *testing.T, path string, first int, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, l := range lines {
		fields := strings.SplitN(l, " ", 3)
		e := Entry{Time: t0.Add(time.Duration(first+i) * time.Second), Stream: fields[0], Partial: fields[1] == "P", Log: []byte(fields[2])}
		if _, err := f.Write(AppendLine(nil, e)); err != nil {
			t.Fatal(err)
		}
	}
}

type fixture struct {
	logs *fakeLogs
	dir  string
	url  string
	srv  *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	logs := &fakeLogs{attempts: map[string][]string{}, waiting: map[string]string{}}
	s, err := New(Config{Logs: logs, Now: func() time.Time { return t0.Add(10 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &fixture{logs: logs, dir: dir, url: srv.URL, srv: srv}
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(f.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestContainerLogs(t *testing.T) {
	f := newFixture(t)
	cur, prev := filepath.Join(f.dir, "1.log"), filepath.Join(f.dir, "0.log")
	writeLog(t, prev, 0, "stdout F old one", "stdout F old two")
	writeLog(t, cur, 0,
		"stdout F line 0",  // t0
		"stderr F line 1",  // t0+1
		"stdout P line ",   // t0+2
		"stdout P 2 in ",   // t0+3
		"stdout F 3 parts", // t0+4
		"stdout F line 3",  // t0+5
		"stdout F ",        // t0+6: an empty line
	)
	f.logs.set("ns/web/app", prev, cur)
	f.logs.set("ns/web/only", cur)
	f.logs.waiting["ns/web/init"] = `container "init" in pod "web" is waiting to start: ContainerCreating`

	ts := func(sec int) string { return t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano) }
	cases := []struct {
		name, query string
		code        int
		want        string
	}{
		{"plain", "", 200, "line 0\nline 1\nline 2 in 3 parts\nline 3\n\n"},
		{"tail 2", "?tailLines=2", 200, "line 3\n\n"},
		{"tail 3 counts a split line once", "?tailLines=3", 200, "line 2 in 3 parts\nline 3\n\n"},
		{"tail more than there is", "?tailLines=100", 200, "line 0\nline 1\nline 2 in 3 parts\nline 3\n\n"},
		{"tail 0", "?tailLines=0", 200, ""},
		{"timestamps", "?timestamps=true&tailLines=3", 200, ts(2) + " line 2 in 3 parts\n" + ts(5) + " line 3\n" + ts(6) + " \n"},
		{"sinceTime", "?sinceTime=" + ts(5), 200, "line 3\n\n"},
		{"sinceSeconds (now is t0+10s)", "?sinceSeconds=5", 200, "line 3\n\n"},
		{"limitBytes", "?limitBytes=10", 200, "line 0\nlin"},
		{"previous", "?previous=true", 200, "old one\nold two\n"},
		{"follow of a previous attempt ends", "?previous=true&follow=true", 200, "old one\nold two\n"},
		{"negative tail", "?tailLines=-1", 400, "tailLines: Invalid value: -1: must be greater than or equal to 0"},
		{"bad tail", "?tailLines=x", 400, `tailLines: invalid integer "x"`},
		{"zero limit", "?limitBytes=0", 400, "limitBytes: Invalid value: 0: must be greater than 0"},
		{"zero since", "?sinceSeconds=0", 400, "sinceSeconds: Invalid value: 0: must be greater than 0"},
		{"both since", "?sinceSeconds=1&sinceTime=" + ts(1), 400, "at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{"bad follow", "?follow=maybe", 400, `follow: invalid boolean "maybe"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.get(t, "/containerLogs/ns/web/app"+c.query)
			if code != c.code {
				t.Fatalf("code %d, want %d; body %q", code, c.code, body)
			}
			if c.code != 200 {
				wantStatusMessage(t, body, c.code, c.want)
				return
			}
			if body != c.want {
				t.Fatalf("body %q, want %q", body, c.want)
			}
		})
	}

	errCases := []struct {
		path, want string
		code       int
	}{
		{"/containerLogs/ns/web/only?previous=true", `previous terminated container "only" in pod "web" not found`, 400},
		{"/containerLogs/ns/nope/app", `pod "nope" does not exist`, 404},
		{"/containerLogs/ns/web/nope", `container "nope" not found in pod "web"`, 404},
		{"/containerLogs/ns/web/init", `container "init" in pod "web" is waiting to start: ContainerCreating`, 400},
		{"/containerLogs/ns/web", "the server could not find the requested resource /containerLogs/ns/web", 404},
	}
	for _, c := range errCases {
		code, body := f.get(t, c.path)
		if code != c.code {
			t.Errorf("%s: code %d, want %d (%s)", c.path, code, c.code, body)
			continue
		}
		wantStatusMessage(t, body, c.code, c.want)
	}
	if code, body := f.get(t, "/healthz"); code != 200 || body != "ok" {
		t.Errorf("healthz: %d %q", code, body)
	}
}

func wantStatusMessage(t *testing.T, body string, code int, msg string) {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("body %q is not a Status: %v", body, err)
	}
	if st.Kind != "Status" || st.Status != metav1.StatusFailure || int(st.Code) != code || st.Message != msg {
		t.Fatalf("status %+v, want code %d message %q", st, code, msg)
	}
}

// readLine reads one output line within a generous deadline.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() { s, err := r.ReadString('\n'); ch <- res{s, err} }()
	select {
	case got := <-ch:
		if got.err != nil {
			t.Fatalf("read: %v (got %q)", got.err, got.s)
		}
		return got.s
	case <-time.After(30 * time.Second):
		t.Fatal("no line within 30s")
		return ""
	}
}

func TestFollow(t *testing.T) {
	f := newFixture(t)
	first, second := filepath.Join(f.dir, "0.log"), filepath.Join(f.dir, "1.log")
	writeLog(t, first, 0, "stdout F a")
	f.logs.set("ns/web/app", first)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/containerLogs/ns/web/app?follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if got := readLine(t, r); got != "a\n" {
		t.Fatalf("first line %q", got)
	}
	// A line written in two writes (the second half later) arrives whole.
	writeLog(t, first, 1, "stdout F b")
	fh, err := os.OpenFile(first, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := AppendLine(nil, Entry{Time: t0.Add(2 * time.Second), Stream: "stdout", Log: []byte("c")})
	_, _ = fh.Write(line[:10])
	if got := readLine(t, r); got != "b\n" {
		t.Fatalf("second line %q", got)
	}
	_, _ = fh.Write(line[10:])
	fh.Close()
	if got := readLine(t, r); got != "c\n" {
		t.Fatalf("third line %q", got)
	}
	// A newer attempt appears: the follow drains the old file and ends.
	writeLog(t, first, 3, "stdout F last words")
	writeLog(t, second, 0, "stdout F new attempt")
	f.logs.set("ns/web/app", first, second)
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "last words\n" {
		t.Fatalf("rest %q", rest)
	}
}

func TestFollowEndsWhenClientGoes(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.dir, "0.log")
	writeLog(t, path, 0, "stdout F a")
	f.logs.set("ns/web/app", path)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/containerLogs/ns/web/app?follow=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, bufio.NewReader(resp.Body)); got != "a\n" {
		t.Fatalf("line %q", got)
	}
	cancel()
	resp.Body.Close()
	// httptest.Server.Close (cleanup) blocks until the handler returned: the test ends only if it did.
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := LoadOrIssueServing(ca, dir, "node-a", []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrIssueServing(ca, dir, "node-a", nil)
	if err != nil || string(again.Certificate[0]) != string(cert.Certificate[0]) {
		t.Fatalf("second LoadOrIssueServing issued a new certificate (err %v)", err)
	}
	s, err := New(Config{Logs: &fakeLogs{attempts: map[string][]string{}}, TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool()}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	clientPEM, clientKey, err := ca.Issue(pki.CertSpec{CommonName: "kube-apiserver-kubelet-client", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(clientPEM, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String() + "/healthz"
	get := func(certs []tls.Certificate, serverName string) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs, ServerName: serverName}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := get([]tls.Certificate{clientCert}, ""); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	if err := get([]tls.Certificate{clientCert}, "node-a"); err != nil {
		t.Errorf("by node name: %v", err)
	}
	if err := get(nil, ""); err == nil {
		t.Errorf("without a client certificate: no error")
	}
}

// fakeStats answers each stats path with its own name.
type fakeStats struct{}

func (fakeStats) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
}

func (fakeStats) SummaryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("summary")) })
}

func TestStatsRoutes(t *testing.T) {
	for _, tc := range []struct {
		stats      StatsHandlers
		path, want string
		code       int
	}{
		{fakeStats{}, "/metrics/resource", "metrics", 200},
		{fakeStats{}, "/stats/summary", "summary", 200},
		{nil, "/metrics/resource", "", 404},
		{nil, "/stats/summary", "", 404},
	} {
		s, err := New(Config{Logs: &fakeLogs{attempts: map[string][]string{}}, Stats: tc.stats})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.code || (tc.want != "" && rec.Body.String() != tc.want) {
			t.Errorf("stats %v GET %s = %d %q, want %d %q", tc.stats != nil, tc.path, rec.Code, rec.Body, tc.code, tc.want)
		}
	}
}
