package testimage

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// serverBinary compiles ./httpserver as a static linux binary and returns its bytes. The
// binary is cached in the temp directory under the hash of its source and the Go version,
// so each test process (and every later one) compiles it at most once; concurrent builds
// race harmlessly because each writes a private file and renames it into place.
func serverBinary(t testing.TB) []byte {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("httpserver: cannot locate the testimage sources")
	}
	srcDir := filepath.Join(filepath.Dir(self), "httpserver")
	src, err := os.ReadFile(filepath.Join(srcDir, "main.go"))
	if err != nil {
		t.Fatalf("httpserver source: %v", err)
	}
	sum := sha256.Sum256(append(src, runtime.Version()+runtime.GOARCH...))
	dir := filepath.Join(cacheDir(), hex.EncodeToString(sum[:8]))
	cached := filepath.Join(dir, "server")
	if b, err := os.ReadFile(cached); err == nil {
		return b
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("httpserver cache: %v", err)
	}
	tmp, err := os.CreateTemp(dir, "server-*.tmp")
	if err != nil {
		t.Fatalf("httpserver cache: %v", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.CommandContext(t.Context(), goBinary(), "build", "-trimpath", "-ldflags=-s -w", "-o", tmp.Name(), ".")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build httpserver: %v\n%s", err, out)
	}
	if err := os.Rename(tmp.Name(), cached); err != nil {
		t.Fatalf("httpserver cache: %v", err)
	}
	b, err := os.ReadFile(cached)
	if err != nil {
		t.Fatalf("httpserver cache: %v", err)
	}
	return b
}

// goBinary finds the go command: on PATH, else in GOROOT.
func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
