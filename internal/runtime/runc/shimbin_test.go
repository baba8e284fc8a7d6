package runc

import (
	"os"
	"path/filepath"
	"slices"
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
	if got, want := defaultShim(exe), []string{small}; !slices.Equal(got, want) {
		t.Errorf("with %s beside: %q, want %q", ShimBinary, got, want)
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
