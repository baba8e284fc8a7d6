package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Serve serves srv's RuntimeService and ImageService on a unix socket (mode 0600; a stale
// socket file is removed first, a live one is an error) until ctx ends, then stops gracefully, cutting off after
// a few seconds RPCs that do not finish.
func Serve(ctx context.Context, socketPath string, srv *Server) error {
	if err := os.MkdirAll(filepath.Dir(socketPath), 0o711); err != nil {
		return fmt.Errorf("cri: create socket directory: %w", err)
	}
	if c, err := net.DialTimeout("unix", socketPath, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("cri: another process serves %s", socketPath)
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cri: remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		return fmt.Errorf("cri: listen on %s: %w", socketPath, err)
	}
	if err := os.Chmod(socketPath, 0o600); err != nil {
		_ = l.Close()
		return fmt.Errorf("cri: chmod %s: %w", socketPath, err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20))
	runtimeapi.RegisterRuntimeServiceServer(g, srv)
	runtimeapi.RegisterImageServiceServer(g, srv)
	done := make(chan error, 1)
	go func() { done <- g.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("cri: serve: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		g.Stop()
		<-stopped
	}
	<-done
	_ = os.Remove(socketPath)
	return nil
}
