// Package needs lets a test declare what of the host it needs (root, a binary, CNI plugins).
// Outside CI a missing need skips the test with a message that says how to get it; inside CI
// (CI=true), where .ci/run installs everything, a missing need fails the test.
package needs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports whether the tests run under CI, where every need must be met.
func InCI() bool { return os.Getenv("CI") == "true" }

// missing skips or fails t, depending on InCI.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI must provide this: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// Root requires the test to run as root.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "needs root (run the tests as root)")
	}
}

// Binary requires an executable on PATH and returns its path; pkg names the Debian package.
func Binary(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "needs %s on PATH (apt-get install -y %s)", name, pkg)
	}
	return p
}

// CNIPluginDirs returns where the standard CNI plugins are looked for, Debian's first.
func CNIPluginDirs() []string { return []string{"/usr/lib/cni", "/opt/cni/bin"} }

// CNIPlugins requires the standard CNI plugins (bridge, host-local, loopback, portmap) and
// returns the directory that holds them.
func CNIPlugins(t testing.TB) string {
	t.Helper()
	for _, dir := range CNIPluginDirs() {
		ok := true
		for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				ok = false
				break
			}
		}
		if ok {
			return dir
		}
	}
	missing(t, "needs the CNI plugins in one of %v (apt-get install -y containernetworking-plugins)", CNIPluginDirs())
	return ""
}
