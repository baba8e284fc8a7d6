package runtime

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kubette/kubette/internal/runtime/cri"
)

// localGrace is how long Run waits, when it stops, for in-process calls still running (as the
// socket's graceful stop does for its calls).
const localGrace = 5 * time.Second

// Local hands a kubelet in the same process (`kubette up`) an in-process connection to the
// CRI server of one Run (Config.Local), so that its calls skip gRPC's marshalling and the
// socket: cri.LocalConn. The socket is served all the same, for every other client.
type Local struct {
	once  sync.Once
	ready chan struct{}
	conn  *cri.LocalConn // nil: Run stopped before it served
}

// NewLocal returns a Local for one Run.
func NewLocal() *Local { return &Local{ready: make(chan struct{})} }

// set publishes the server's connection; only Run calls it.
func (l *Local) set(c *cri.LocalConn) {
	l.once.Do(func() {
		l.conn = c
		close(l.ready)
	})
}

// stopped tells waiting callers that Run has returned; after set it changes nothing.
func (l *Local) stopped() { l.set(nil) }

// Conn waits until Run has opened the CRI server and returns the in-process connection to it
// (which fails every call with Unavailable once Run has stopped); it returns ctx's error if ctx
// ends first, and an error if Run stopped before it served.
func (l *Local) Conn(ctx context.Context) (grpc.ClientConnInterface, error) {
	select {
	case <-l.ready:
		if l.conn == nil {
			return nil, errors.New("the container runtime stopped before it served")
		}
		return l.conn, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
