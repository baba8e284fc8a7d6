package runc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDefaultShim(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kubette")
	if got, want := defaultShim(exe), []string{exe, "shim"}; !slices.Equal(got, want) {
		t.Errorf("without %s: %q, want %q", ShimBinary, got, want)
	}
	small := filepath.Join(dir, ShimBinary)
	if err := os.WriteFile(small, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := defaultShim(exe), []string{exe, "shim"}; !slices.Equal(got, want) {
		t.Errorf("with a %s that is not executable: %q, want %q", ShimBinary, got, want)
	}
	if err := os.Chmod(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := defaultShim(exe), []string{exe, "shim"}; !slices.Equal(got, want) {
		t.Errorf("with a %s that answers no protocol: %q, want %q", ShimBinary, got, want)
	}
	if err := os.WriteFile(small, []byte("#!/bin/sh\necho kubette-shim/0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := defaultShim(exe), []string{exe, "shim"}; !slices.Equal(got, want) {
		t.Errorf("with a stale %s: %q, want %q", ShimBinary, got, want)
	}
	if err := os.WriteFile(small, []byte("#!/bin/sh\n[ \"$1\" = -protocol ] && echo "+ShimProtocol+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := defaultShim(exe), []string{small}; !slices.Equal(got, want) {
		t.Errorf("with %s beside: %q, want %q", ShimBinary, got, want)
	}
}

func TestShimAnswersItsProtocol(t *testing.T) {
	bin := filepath.Join(t.TempDir(), ShimBinary)
	build := exec.Command("go", "build", "-o", bin, "github.com/kubette/kubette/cmd/kubette-shim")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", ShimBinary, err, out)
	}
	out, err := exec.Command(bin, "-protocol").Output()
	if err != nil || strings.TrimSpace(string(out)) != ShimProtocol {
		t.Fatalf("%s -protocol = %q, %v; want %q", ShimBinary, out, err, ShimProtocol)
	}
}

// TestShimLinksNoCgo keeps kubette-shim a statically linked program however it is built: a
// package that needs cgo (net, os/user) makes it a dynamically linked one, whose every start
// runs the dynamic loader and glibc's CPUID probes (sock.go).
func TestShimLinksNoCgo(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/kubette/kubette/cmd/kubette-shim").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "runtime/cgo" || p == "net" || p == "os/user" {
			t.Errorf("%s depends on %s", ShimBinary, p)
		}
	}
}

func TestShimEnviron(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/root"}
	got := shimEnviron(env)
	if want := []string{"PATH=/bin", "HOME=/root", "GOGC=off", shimGCEnv + "=1"}; !slices.Equal(got, want) {
		t.Errorf("shimEnviron = %q, want %q", got, want)
	}
	if len(env) != 2 {
		t.Errorf("shimEnviron changed its input: %q", env)
	}
	user := []string{"PATH=/bin", "GOGC=50"}
	if got := shimEnviron(user); !slices.Equal(got, user) {
		t.Errorf("with the user's GOGC: %q, want it kept as %q", got, user)
	}
}
