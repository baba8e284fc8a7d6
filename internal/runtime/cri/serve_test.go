package cri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestServeOverUnixSocket(t *testing.T) {
	e := newEnv(t)
	sock := filepath.Join(e.dir, "cri.sock")
	writeFile(t, sock, "stale") // a stale file is replaced
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(sctx, sock, e.srv) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	v, err := rs.Version(cctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true))
	if err != nil || v.RuntimeName != "kubette" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %v, %v", fi.Mode(), err)
	}
	imgs, err := is.ListImages(cctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(imgs.Images) != 1 {
		t.Errorf("ListImages = %v, %v", imgs, err)
	}
	_, err = rs.Exec(cctx, &runtimeapi.ExecRequest{})
	wantCode(t, err, codes.Unimplemented)
	if err := Serve(sctx, sock, e.srv); err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Errorf("a second Serve on a live socket: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	done <- nil // for the cleanup
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}
