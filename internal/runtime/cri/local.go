package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LocalConn is an in-process connection to a Server: a grpc.ClientConnInterface whose
// unary calls run the server's handlers directly, for a kubelet in the same process
// (`kubette up`). It keeps what the socket gives both sides: the handler gets a copy of the
// request and the caller a copy of the response (neither shares messages with the other),
// an error arrives as a gRPC status (a plain error as Unknown with its text, a context's as
// Canceled or DeadlineExceeded), and calls after Close fail with Unavailable. What it saves
// per call is the marshalling, the HTTP/2 framing and the socket's system calls and wake-ups.
// Streaming methods are not offered (the kubelet uses none).
type LocalConn struct {
	methods map[string]localMethod

	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup
}

type localMethod struct {
	srv     any
	handler grpc.MethodHandler
}

var _ grpc.ClientConnInterface = (*LocalConn)(nil)

// LocalConn returns an in-process connection to s's RuntimeService and ImageService.
func (s *Server) LocalConn() *LocalConn {
	c := &LocalConn{methods: map[string]localMethod{}}
	for _, svc := range []struct {
		desc *grpc.ServiceDesc
		srv  any
	}{{&runtimeapi.RuntimeService_ServiceDesc, runtimeapi.RuntimeServiceServer(s)}, {&runtimeapi.ImageService_ServiceDesc, runtimeapi.ImageServiceServer(s)}} {
		for _, m := range svc.desc.Methods {
			c.methods["/"+svc.desc.ServiceName+"/"+m.MethodName] = localMethod{srv: svc.srv, handler: m.Handler}
		}
	}
	return c
}

// Invoke runs a unary method's handler with a copy of args and copies its response into reply.
func (c *LocalConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	m, ok := c.methods[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	in, ok1 := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok1 || !ok2 {
		return status.Errorf(codes.Internal, "%s: request and reply must be protocol buffer messages", method)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return status.Error(codes.Unavailable, "the container runtime has stopped")
	}
	c.inFlight.Add(1)
	c.mu.Unlock()
	defer c.inFlight.Done()

	dec := func(req any) error {
		r, ok := req.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "%s: request is no protocol buffer message", method)
		}
		proto.Merge(r, in)
		return nil
	}
	resp, err := m.handler(m.srv, ctx, dec, nil)
	if err != nil {
		return asStatus(err)
	}
	r, ok := resp.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: response is no protocol buffer message", method)
	}
	proto.Reset(out)
	proto.Merge(out, r)
	return nil
}

// asStatus turns a handler's error into what a gRPC client receives.
func asStatus(err error) error {
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// NewStream fails: the in-process connection offers no streaming method.
func (c *LocalConn) NewStream(_ context.Context, _ *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Errorf(codes.Unimplemented, "%s: streaming methods are not served in process", method)
}

// Close refuses new calls and waits up to grace for those running, as the socket's graceful
// stop does; it returns an error if some still run.
func (c *LocalConn) Close(grace time.Duration) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.inFlight.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("cri: in-process calls still running after %s", grace)
	}
}
