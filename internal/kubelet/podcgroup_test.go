package kubelet

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemovePodCgroup(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/kubette/poduid-1", "cpu/kubette/poduid-1", "pids/kubette/poduid-1/ctr", "memory/kubette/poduid-2"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removePodCgroup(root, "uid-1")
	removePodCgroup(root, "../kubette") // not a UID: nothing happens
	removePodCgroup(root, "")
	for d, want := range map[string]bool{
		"memory/kubette/poduid-1":   false,
		"cpu/kubette/poduid-1":      false,
		"pids/kubette/poduid-1/ctr": true, // a cgroup still in use keeps its parent
		"memory/kubette/poduid-2":   true, // another pod's
		"memory/kubette":            true,
	} {
		if _, err := os.Stat(filepath.Join(root, d)); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", d, err == nil, want)
		}
	}
}
