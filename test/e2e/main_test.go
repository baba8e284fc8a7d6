package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tools is what TestMain finds or builds once for the whole package; it is
// written only by TestMain, before any test runs.
var tools struct {
	kubette string // the freshly built kubette binary
	kubectl string // the kubectl on PATH
	skip    string // when set, every test skips with this reason
}

// inCI reports whether the tests run in CI, where a missing tool fails instead of skipping.
func inCI() bool { return os.Getenv("CI") == "true" }

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch kubectl, err := exec.LookPath("kubectl"); {
	case testing.Short():
		tools.skip = "e2e tests do not run with -short"
	case err != nil && inCI():
		fmt.Fprintln(os.Stderr, "e2e: kubectl is not on PATH, and CI=true requires it:", err)
		return 1
	case err != nil:
		tools.skip = "kubectl is not on PATH (install kubectl to run the e2e tests; with CI=true this fails instead)"
	default:
		tools.kubectl = kubectl
	}
	if tools.skip != "" {
		return m.Run()
	}

	dir, err := os.MkdirTemp("", "kubette-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := buildKubette(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	tools.kubette = bin
	return m.Run()
}

// buildKubette builds ./cmd/kubette of the module two levels up into dir, with the runtime's
// small shim binary (./cmd/kubette-shim) beside it, as the README's first command does.
func buildKubette(dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.Contains(gomod, []byte("module github.com/kubette/kubette\n")) {
		return "", fmt.Errorf("%s is not the kubette module root (go.mod: %v)", root, err)
	}
	bin := filepath.Join(dir, "kubette")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/kubette", "./cmd/kubette-shim")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/kubette ./cmd/kubette-shim in %s: %v\n%s", root, err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %s\n", bin, time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// requireTools skips t when TestMain decided the e2e tests cannot run here.
func requireTools(t *testing.T) {
	t.Helper()
	if tools.skip != "" {
		t.Skip(tools.skip)
	}
}

// requireBinary returns the path of an external program the test needs: when
// it is missing the test skips, or fails with CI=true.
func requireBinary(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s is not on PATH (%s)", name, install)
	if inCI() {
		t.Fatal(msg + "; CI=true requires it")
	}
	t.Skip(msg)
	return ""
}
