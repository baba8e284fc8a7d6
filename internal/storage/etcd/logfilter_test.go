package etcd

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/soheilhy/cmux"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestClosedListenerFilter(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	closing := &atomic.Bool{}
	l := zap.New(&closedListenerFilter{Core: core, closing: closing})
	closed := fmt.Errorf("serve: %w", http.ErrServerClosed)
	l.Error("setting up serving from embedded etcd failed", zap.Error(closed))
	l.Error("failed to update storage version", zap.String("cluster-version", "3.7.0"), zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	closing.Store(true)
	l.Error("setting up serving from embedded etcd failed", zap.Error(closed))
	l.Error("setting up serving from embedded etcd failed", zap.Error(cmux.ErrServerClosed))
	l.With(zap.String("member", "kubette")).Error("failed to save snapshot", zap.Error(errors.New("disk full")))
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	if len(got) != 2 || got[0] != "setting up serving from embedded etcd failed" || got[1] != "failed to save snapshot" {
		t.Fatalf("logged %q: want the closed-server error only before Close, and every other error", got)
	}
}
