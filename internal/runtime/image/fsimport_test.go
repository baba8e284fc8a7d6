package image

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestImportMakesAOneLayerImageOfARootfsTarball(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name, body string
		dir        bool
	}{{name: "bin/", dir: true}, {name: "bin/hello", body: "#!/bin/sh\necho hi\n"}, {name: "www/index.html", body: "hello\n"}} {
		h := &tar.Header{Name: f.name, Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Import(context.Background(), path, "busybox:local", ImportOptions{Cmd: []string{"sh"}})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if !slices.Equal(img.RepoTags, []string{"docker.io/library/busybox:local"}) || !slices.Equal(img.Config.Cmd, []string{"sh"}) {
		t.Errorf("imported image = %+v", img)
	}
	got, err := s.Get("busybox:local")
	if err != nil || got.ID != img.ID {
		t.Fatalf("Get after Import = %+v, %v", got, err)
	}
	if _, err := s.Import(context.Background(), path, "busybox@sha256:"+string(bytes.Repeat([]byte("a"), 64)), ImportOptions{}); err == nil {
		t.Error("Import under a digest reference must fail: it names no tag")
	}
}
