package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/storage/storagetest"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ storagetest.Compactor = (*Store)(nil)

// externalEtcd is the etcd binary of Debian's etcd-server package.
const externalEtcd = "/usr/bin/etcd"

func startEmbedded(t testing.TB, cfg EmbeddedConfig) *Embedded {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	start := time.Now()
	e, err := StartEmbedded(t.Context(), cfg)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Logf("embedded etcd ready in %v at %v", time.Since(start), e.Endpoints)
	t.Cleanup(e.Close)
	return e
}

func embeddedStore(t testing.TB, e *Embedded) *Store {
	t.Helper()
	return closedAtCleanup(t, "Store", e.Store)
}

// inProcessStore is e's in-process Store, closed when the test ends.
func inProcessStore(t testing.TB, e *Embedded) *Store {
	t.Helper()
	return closedAtCleanup(t, "InProcessStore", e.InProcessStore)
}

// closedAtCleanup opens a Store with open (Embedded.<name>) and closes it when the test ends.
func closedAtCleanup(t testing.TB, name string, open func() (*Store, error)) *Store {
	t.Helper()
	s, err := open()
	if err != nil {
		t.Fatalf("Embedded.%s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Store.Close: %v", err)
		}
	})
	return s
}

func TestConformanceEmbedded(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	storagetest.Run(t, func(t *testing.T) storage.Store { return embeddedStore(t, e) })
}

func TestConformanceInProcess(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	storagetest.Run(t, func(t *testing.T) storage.Store { return inProcessStore(t, e) })
}

func TestConformanceExternal(t *testing.T) {
	endpoints := startExternal(t)
	storagetest.Run(t, func(t *testing.T) storage.Store {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := Dial(ctx, endpoints, nil)
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Store.Close: %v", err)
			}
		})
		return s
	})
}

// startExternal runs the Debian etcd binary on free loopback ports with its
// own data directory and returns its client endpoints.
func startExternal(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(externalEtcd); err != nil {
		msg := fmt.Sprintf("external etcd %s not available (install it with `apt-get install -y etcd-server`): %v", externalEtcd, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var lastErr error
	for range 3 {
		endpoints, err := tryStartExternal(t)
		if err == nil {
			return endpoints
		}
		lastErr = err
	}
	t.Fatalf("starting %s: %v", externalEtcd, lastErr)
	return nil
}

func tryStartExternal(t *testing.T) ([]string, error) {
	clientPort, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cmd := exec.Command(externalEtcd,
		"--name=external",
		"--data-dir="+filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=external="+peerURL,
		"--initial-cluster-state=new",
		"--heartbeat-interval=10",
		"--election-timeout=100",
		"--logger=zap",
		"--log-outputs=stderr",
		"--log-level=error",
	)
	// Keep ETCD_* settings of the environment from reconfiguring the server.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() {
		// Dialling before the port listens would put the client into its
		// reconnect back-off: wait for the listener first.
		addr := strings.TrimPrefix(clientURL, "http://")
		for ctx.Err() == nil {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		s, err := Dial(ctx, []string{clientURL}, nil)
		if err == nil {
			err = s.Close()
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			stop()
			return nil, fmt.Errorf("not ready: %w; output:\n%s", err, logs)
		}
	case <-exited:
		cancel()
		<-ready
		return nil, fmt.Errorf("exited early: %v; output:\n%s", cmd.ProcessState, logs)
	}
	t.Logf("external etcd ready in %v at %s", time.Since(start), clientURL)
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("external etcd output:\n%s", logs)
		}
	})
	return []string{clientURL}, nil
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	e1, err := StartEmbedded(ctx, EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("first StartEmbedded: %v", err)
	}
	s1, err := e1.Store()
	if err != nil {
		e1.Close()
		t.Fatal(err)
	}
	want := map[string]storage.KeyValue{}
	for i := range 10 {
		k := fmt.Sprintf("/restart/k%d", i)
		rev, err := s1.Create(ctx, k, []byte(strconv.Itoa(i)))
		if err != nil {
			e1.Close()
			t.Fatal(err)
		}
		want[k] = storage.KeyValue{Key: k, Value: []byte(strconv.Itoa(i)), ModRevision: rev, CreateRevision: rev}
	}
	upd, err := s1.Update(ctx, "/restart/k3", []byte("updated"), want["/restart/k3"].ModRevision)
	if err == nil {
		kv := want["/restart/k3"]
		kv.Value, kv.ModRevision = []byte("updated"), upd
		want["/restart/k3"] = kv
		_, _, err = s1.Delete(ctx, "/restart/k7", 0)
		delete(want, "/restart/k7")
	}
	if err != nil {
		e1.Close()
		t.Fatal(err)
	}
	lastRev, err := s1.CurrentRevision(ctx)
	if err != nil {
		e1.Close()
		t.Fatal(err)
	}
	// Close the embedded server without closing the Store first: Close must
	// still finish promptly.
	closeStart := time.Now()
	e1.Close()
	t.Logf("first server closed in %v", time.Since(closeStart))
	_ = s1.Close()

	e2 := startEmbedded(t, EmbeddedConfig{DataDir: dir})
	s2 := embeddedStore(t, e2)
	res, err := s2.List(ctx, "/restart/", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != len(want) {
		t.Fatalf("after restart: %d keys, want %d", len(res.Items), len(want))
	}
	for _, kv := range res.Items {
		w := want[kv.Key]
		if !bytes.Equal(kv.Value, w.Value) || kv.ModRevision != w.ModRevision || kv.CreateRevision != w.CreateRevision {
			t.Errorf("after restart %q = %+v, want %+v", kv.Key, kv, w)
		}
	}
	if rev, err := s2.CurrentRevision(ctx); err != nil || rev != lastRev {
		t.Fatalf("after restart CurrentRevision = %d, %v; want %d", rev, err, lastRev)
	}
	if rev, err := s2.Create(ctx, "/restart/new", nil); err != nil || rev != lastRev+1 {
		t.Fatalf("Create after restart = %d, %v; want revision %d", rev, err, lastRev+1)
	}
}

func TestEmbeddedUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "etcd.sock")
	if len(sock) > 100 {
		t.Skipf("temporary directory path too long for a unix socket: %s", sock)
	}
	e := startEmbedded(t, EmbeddedConfig{DataDir: filepath.Join(dir, "data"), ClientURL: "unix://" + sock})
	if len(e.Endpoints) != 1 || e.Endpoints[0] != "unix://"+sock {
		t.Fatalf("Endpoints = %v, want [unix://%s]", e.Endpoints, sock)
	}
	s := embeddedStore(t, e)
	if _, err := s.Create(t.Context(), "/unix/a", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedConfigErrors(t *testing.T) {
	if _, err := StartEmbedded(t.Context(), EmbeddedConfig{}); err == nil {
		t.Fatal("StartEmbedded without DataDir succeeded")
	}
	// A port that is taken: the caller chose it, so there is no retry.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = StartEmbedded(t.Context(), EmbeddedConfig{DataDir: t.TempDir(), ClientURL: "http://" + l.Addr().String()})
	if err == nil {
		t.Fatal("StartEmbedded on a busy port succeeded")
	}
	// StartEmbedded retries a port it picked itself on exactly this error.
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("busy port error %v does not wrap EADDRINUSE", err)
	}
	t.Logf("busy port: %v", err)
}

func TestEmbeddedStartTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	_, err := StartEmbedded(ctx, EmbeddedConfig{DataDir: t.TempDir()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("StartEmbedded with a cancelled context: %v, want context.Canceled", err)
	}
	t.Logf("gave up in %v: %v", time.Since(start), err)
}

func TestEmbeddedCloseClosesClients(t *testing.T) {
	e, err := StartEmbedded(t.Context(), EmbeddedConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Store()
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	// An open watch stream would hold etcd's graceful stop for seconds.
	if _, err := s.Watch(t.Context(), "/w/", 0); err != nil {
		e.Close()
		t.Fatal(err)
	}
	start := time.Now()
	e.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v with an open watch", d)
	}
	e.Close() // idempotent
	if _, err := e.Client(); err == nil {
		t.Error("Client after Close succeeded")
	}
}

func TestNewDoesNotOwnClient(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	client, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := New(client).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get(t.Context(), "/x"); err != nil {
		t.Fatalf("client unusable after closing a Store that does not own it: %v", err)
	}
	owned := New(client, OwnClient())
	if err := owned.Close(); err != nil {
		t.Fatal(err)
	}
	if client.Ctx().Err() == nil {
		t.Fatal("client still open after closing the Store that owns it")
	}
	// A closed Store fails fast instead of going through the client's retries.
	start := time.Now()
	if _, err := owned.Get(t.Context(), "/x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a closed Store: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Get on a closed Store took %v", d)
	}
}

func TestDialUnreachable(t *testing.T) {
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if s, err := Dial(ctx, []string{fmt.Sprintf("http://127.0.0.1:%d", port)}, nil); err == nil {
		s.Close()
		t.Fatal("Dial to a closed port succeeded")
	} else {
		t.Logf("Dial: %v", err)
	}
}

func TestErrorsCarryContext(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	s := embeddedStore(t, e)
	ctx := t.Context()
	rev, err := s.Create(ctx, "/ctx/a", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(ctx, "/ctx/a", []byte("w"), rev+100)
	var ce *storage.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, storage.ErrConflict) || !strings.Contains(err.Error(), `etcd update "/ctx/a"`) {
		t.Fatalf("stale update error %q lacks context or sentinel", err)
	}
	if ce.Current.ModRevision != rev {
		t.Fatalf("conflict carries revision %d, want %d", ce.Current.ModRevision, rev)
	}
	_, err = s.List(ctx, "/ctx/", storage.ListOptions{Revision: rev + 1000})
	if !errors.Is(err, storage.ErrFutureRevision) || !strings.Contains(err.Error(), `etcd list "/ctx/"`) {
		t.Fatalf("future list error %q lacks context or sentinel", err)
	}
	if _, err := s.List(ctx, "/ctx/", storage.ListOptions{StartKey: "/other/a"}); err == nil {
		t.Fatal("List with a start key outside the prefix succeeded")
	}
}

// TestWatchSlowConsumer checks that a watch whose consumer stopped reading
// still ends, and its goroutine with it, once the context is cancelled.
func TestWatchSlowConsumer(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{UnsafeNoFsync: true})
	s := embeddedStore(t, e)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := s.Watch(ctx, "/slow/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range watchBuffer + 20 {
		if last, err = s.Create(t.Context(), fmt.Sprintf("/slow/k%03d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the forwarding goroutine is blocked on a full channel.
	deadline := time.Now().Add(10 * time.Second)
	for len(ch) < watchBuffer && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if len(ch) < watchBuffer {
		t.Fatalf("watch queued %d results, want %d", len(ch), watchBuffer)
	}
	cancel()
	drained := 0
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				if drained < watchBuffer {
					t.Fatalf("drained %d results, want at least %d", drained, watchBuffer)
				}
				t.Logf("drained %d results of %d events up to revision %d", drained, watchBuffer+20, last)
				return
			}
			drained++
			if r.Err != nil {
				t.Fatalf("unexpected watch error after cancel: %v", r.Err)
			}
		case <-timeout:
			t.Fatal("watch channel not closed after cancel")
		}
	}
}

func TestWatchEndsWhenStoreCloses(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	client, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s := New(client)
	ch, err := s.Watch(t.Context(), "/closing/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("unexpected watch result after Store.Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch channel not closed after Store.Close")
	}
}

func TestTranslateWatchResponse(t *testing.T) {
	progress := clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 42}}
	got, err := translateWatchResponse(progress)
	if err != nil || len(got) != 1 || got[0].ProgressRevision != 42 || got[0].Event.Key != "" || got[0].Event.Revision != 0 {
		t.Fatalf("progress notification = %+v, %v; want ProgressRevision 42", got, err)
	}
	compacted := clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 42}, CompactRevision: 40, Canceled: true}
	if _, err := translateWatchResponse(compacted); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("compacted response: %v, want ErrCompacted", err)
	}
}

func TestEmbeddedStartupTime(t *testing.T) {
	dir := t.TempDir()
	var total time.Duration
	const runs = 3
	for i := range runs {
		start := time.Now()
		e, err := StartEmbedded(t.Context(), EmbeddedConfig{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		total += d
		t.Logf("start %d (%s data dir): %v", i+1, map[bool]string{true: "fresh", false: "existing"}[i == 0], d)
		e.Close()
	}
	t.Logf("mean start-up %v", total/runs)
}

// BenchmarkCreate measures parallel creates of distinct keys against an
// embedded etcd, with the default durable settings and with fsync off.
func BenchmarkCreate(b *testing.B) {
	for _, bc := range []struct {
		name    string
		noFsync bool
	}{{"fsync", false}, {"nofsync", true}} {
		b.Run(bc.name, func(b *testing.B) {
			e := startEmbedded(b, EmbeddedConfig{UnsafeNoFsync: bc.noFsync})
			s := embeddedStore(b, e)
			value := bytes.Repeat([]byte("x"), 1024)
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Create(b.Context(), "/bench/"+strconv.FormatInt(n.Add(1), 10), value); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestWatchWithoutPrev checks that WatchWithoutPrev sends the same changes as Watch, with
// no previous values, while Watch sends them for updates and deletes.
func TestWatchWithoutPrev(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{UnsafeNoFsync: true})
	s := embeddedStore(t, e)
	ctx := t.Context()
	with, err := s.Watch(ctx, "/prev/", 0)
	if err != nil {
		t.Fatal(err)
	}
	without, err := s.WatchWithoutPrev(ctx, "/prev/", 0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := s.Create(ctx, "/prev/k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Update(ctx, "/prev/k", []byte("v2"), r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delete(ctx, "/prev/k", r2); err != nil {
		t.Fatal(err)
	}
	next := func(ch <-chan storage.WatchResult) storage.Event {
		t.Helper()
		for {
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Fatalf("watch: %v", r.Err)
				}
				if r.Event.Key != "" {
					return r.Event
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no watch event within 10 s")
			}
		}
	}
	for i, wantPrev := range []string{"", "v1", "v2"} {
		a, b := next(with), next(without)
		if string(a.PrevValue) != wantPrev {
			t.Errorf("Watch event %d: PrevValue %q, want %q", i, a.PrevValue, wantPrev)
		}
		if b.PrevValue != nil {
			t.Errorf("WatchWithoutPrev event %d: PrevValue %q, want none", i, b.PrevValue)
		}
		if a.Type != b.Type || a.Key != b.Key || string(a.Value) != string(b.Value) || a.Revision != b.Revision || a.Created != b.Created {
			t.Errorf("event %d: Watch %+v, WatchWithoutPrev %+v: want the same change", i, a, b)
		}
	}
}
