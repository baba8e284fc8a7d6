package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testEvent(i int) *Event {
	return &Event{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: KindEvent}, Level: LevelMetadata,
		AuditID: types.UID(fmt.Sprintf("id-%06d", i)), Stage: StageResponseComplete, RequestURI: "/api/v1/namespaces/default/configmaps/" + strings.Repeat("x", 200),
		Verb: "get", User: authnv1.UserInfo{Username: "alice", Groups: []string{"dev", "system:authenticated"}}, SourceIPs: []string{"127.0.0.1"},
		ObjectRef:                &ObjectReference{Resource: "configmaps", Namespace: "default", Name: "c", APIVersion: "v1"},
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestReceivedTimestamp: metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		StageTimestamp:           metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC))}
}

// readEvents decodes every line of the files matching pattern.
func readEvents(t *testing.T, pattern string) (events []Event, files int) {
	t.Helper()
	names, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%s: line %q: %v", n, sc.Text(), err)
			}
			events = append(events, ev)
		}
	}
	return events, len(names)
}

func TestLogRotatesAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit", "audit.log")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := NewLog(ctx, LogConfig{Path: path, MaxSize: 1, BufferSize: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000 // about 2.5 MB: two rotations at 1 MB
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				l.Process(testEvent(i))
			}
		}()
	}
	wg.Wait()
	cancel()
	<-l.Done()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	events, files := readEvents(t, filepath.Join(dir, "audit", "audit*.log"))
	if files < 3 {
		t.Errorf("%d files, want the log and at least 2 rotated ones", files)
	}
	seen := map[types.UID]bool{}
	for _, ev := range events {
		seen[ev.AuditID] = true
	}
	if len(events) != n || len(seen) != n {
		t.Errorf("%d events (%d distinct), want %d", len(events), len(seen), n)
	}
	// After the writer stopped, Process drops instead of blocking.
	l.Process(testEvent(n))
}

func TestLogToStdoutAndLegacy(t *testing.T) {
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	l, err := NewLog(ctx, LogConfig{Path: "-", Stdout: &out, Format: FormatLegacy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := testEvent(7)
	ev.RequestURI = "/api/v1/namespaces/default/configmaps/c"
	ev.ImpersonatedUser = &authnv1.UserInfo{Username: "bob", Groups: []string{"g"}}
	l.Process(ev)
	cancel()
	<-l.Done()
	want := `2026-01-02T03:04:05Z AUDIT: id="id-000007" stage="ResponseComplete" ip="127.0.0.1" method="get" user="alice" groups="\"dev\",\"system:authenticated\"" as="bob" asgroups="\"g\"" user-agent="" namespace="default" uri="/api/v1/namespaces/default/configmaps/c" response="200"` + "\n"
	if got := out.String(); got != want {
		t.Errorf("legacy line\n got %s\nwant %s", got, want)
	}
}

func TestNewLogErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		cfg  LogConfig
		want string
	}{
		{LogConfig{Path: filepath.Join(dir, "a.log"), Format: "yaml"}, `format "yaml"`},
		{LogConfig{Path: filepath.Join(dir, "a.log"), MaxSize: -1}, "must not be negative"},
		{LogConfig{}, "no path"},
		{LogConfig{Path: dir}, "open audit log"},
	} {
		if _, err := NewLog(ctx, c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
