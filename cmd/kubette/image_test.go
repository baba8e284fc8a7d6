package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/runtime/image"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

func TestImageLoadAndLs(t *testing.T) {
	dataDir := t.TempDir()
	tarball := testimage.WriteTarball(t, t.TempDir(), "localhost:5000/busybox:v1", testimage.Busybox(t))
	run := func(args ...string) string {
		t.Helper()
		cmd := newImage()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--data-dir", dataDir))
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("kubette image %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	if out := run("load", tarball); out != "Loaded image: localhost:5000/busybox:v1\n" {
		t.Errorf("load printed %q", out)
	}
	out := run("ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^IMAGE\s+TAG\s+IMAGE ID\s+SIZE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^localhost:5000/busybox\s+v1\s+[0-9a-f]{13}\s+[0-9.]+[kM]B$`).MatchString(lines[1]) {
		t.Errorf("ls printed:\n%s", out)
	}
}

func TestPrintImages(t *testing.T) {
	var out bytes.Buffer
	err := printImages(&out, []image.Image{
		{ID: "sha256:0123456789abcdef0123", RepoTags: []string{"docker.io/library/busybox:latest", "docker.io/library/busybox:1"}, Size: 2_270_000},
		{ID: "sha256:fedcba9876543210fedc", RepoDigests: []string{"example.com/app@sha256:aa"}, Size: 999},
		{ID: "sha256:1111111111111111", Size: 1_500_000_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `IMAGE                       TAG      IMAGE ID        SIZE
docker.io/library/busybox   latest   0123456789abc   2.27MB
docker.io/library/busybox   1        0123456789abc   2.27MB
example.com/app             <none>   fedcba9876543   999B
<none>                      <none>   1111111111111   1.5GB
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
