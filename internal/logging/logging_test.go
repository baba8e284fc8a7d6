package logging

import (
	"bytes"
	"errors"
	"log"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
)

// timePrefix matches the handler's time column.
var timePrefix = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d `)

// lines strips the time column of each line the handler wrote.
func lines(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if l == "" {
			continue
		}
		if !timePrefix.MatchString(l) {
			t.Fatalf("line %q does not start with the time", l)
		}
		out = append(out, timePrefix.ReplaceAllString(l, ""))
	}
	return out
}

func TestHandlerFormat(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, slog.LevelInfo)
	l.Debug("hidden")
	l.Info("started", "addr", "0.0.0.0:6443", "took", 1500*time.Millisecond)
	proxy := l.With(ComponentKey, "proxy", "mode", "iptables")
	proxy.Warn("sync failed", "err", errors.New("exit status 1: line 3 failed"), "empty", "", "eq", "a=b", "n", 3)
	proxy.WithGroup("rule").Error("bad rule", "chain", "KUBE-SVC", slog.Group("src", "ip", "10.0.0.1"))
	l.Info("two lines\n", ComponentKey, "kubelet")
	l.Info("grouped", slog.Group("", "flat", 1), "q", `say "hi"`)
	got := lines(t, &buf)
	want := []string{
		"INFO  started addr=0.0.0.0:6443 took=1.5s",
		`WARN  proxy: sync failed mode=iptables err="exit status 1: line 3 failed" empty="" eq="a=b" n=3`,
		"ERROR proxy: bad rule mode=iptables rule.chain=KUBE-SVC rule.src.ip=10.0.0.1",
		"INFO  kubelet: two lines",
		`INFO  grouped flat=1 q="say \"hi\""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHandlerLevelIsDynamic(t *testing.T) {
	var buf bytes.Buffer
	var lv slog.LevelVar
	lv.Set(slog.LevelWarn)
	l := New(&buf, &lv)
	l.Info("no")
	lv.Set(slog.LevelDebug)
	l.Debug("yes")
	if got := lines(t, &buf); len(got) != 1 || got[0] != "DEBUG yes" {
		t.Fatalf("got %q", got)
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "WARN": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud): want an error")
	}
}

func TestZap(t *testing.T) {
	var buf bytes.Buffer
	z := Zap(New(&buf, slog.LevelInfo).With(ComponentKey, "etcd"), zapcore.WarnLevel)
	z.Info("quiet at info")
	z.Named("raft").With(zap.String("member", "kubette")).Warn("slow fdatasync", zap.Duration("took", 2*time.Second), zap.Int("n", 1))
	z.Error("failed", zap.Error(errors.New("disk full")))
	got := lines(t, &buf)
	want := []string{
		"WARN  etcd: slow fdatasync member=kubette logger=raft n=1 took=2s",
		`ERROR etcd: failed error="disk full"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRoute sends klog, the standard library's log, gRPC's logger and slog's default
// through one handler.
func TestRoute(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, slog.LevelInfo)
	Route(l)
	defer func() {
		slog.SetDefault(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
		klog.ClearLogger()
	}()
	klog.InfoS("leader elected", "lease", "kube-system/kube-scheduler")
	klog.V(4).InfoS("too verbose")
	klog.Errorf("watch of %s ended: %v", "*v1.Pod", "EOF")
	log.Printf("http: TLS handshake error from %s", "127.0.0.1:5000")
	slog.Warn("default logger")
	grpclog.Info("[core] channel switches to READY")
	grpclog.Errorf("[transport] %s", "connection reset")
	got := lines(t, &buf)
	want := []string{
		"INFO  klog: leader elected lease=kube-system/kube-scheduler",
		`ERROR klog: watch of *v1.Pod ended: EOF`,
		"INFO  http: TLS handshake error from 127.0.0.1:5000",
		"WARN  default logger",
		"ERROR grpc: [transport] connection reset",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
