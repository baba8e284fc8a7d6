package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/runtime/cri"
)

func TestLocalConn(t *testing.T) {
	l := NewLocal()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Conn(ctx); err == nil {
		t.Fatal("Conn before Run served: no error, want ctx's")
	}
	c := &cri.LocalConn{}
	l.set(c)
	l.stopped() // Run's return after it served changes nothing
	if got, err := l.Conn(context.Background()); err != nil || got != c {
		t.Errorf("Conn = %v, %v; want the served connection", got, err)
	}

	failed := NewLocal()
	failed.stopped()
	if _, err := failed.Conn(context.Background()); err == nil {
		t.Error("Conn after Run stopped without serving: no error")
	}
}
