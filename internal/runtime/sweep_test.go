package runtime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/testenv/needs"
)

func TestParseMountsUnder(t *testing.T) {
	info := `22 1 0:21 / / rw - ext4 /dev/vda rw
100 22 0:50 / /data/runtime/netns/abc rw - nsfs nsfs rw
101 22 0:51 / /data/runtime/containers/c1/bundle/rootfs rw - overlay overlay rw
102 101 0:52 / /data/runtime/containers/c1/bundle/rootfs/dev rw - tmpfs tmpfs rw
103 22 0:53 / /data/runtime-other/x rw - tmpfs tmpfs rw
104 22 0:54 / /data/runtime/with\040space rw - tmpfs tmpfs rw
`
	got, err := parseMountsUnder(strings.NewReader(info), "/data/runtime")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/data/runtime/containers/c1/bundle/rootfs/dev",
		"/data/runtime/containers/c1/bundle/rootfs",
		"/data/runtime/netns/abc",
		"/data/runtime/with space",
	}
	slices.Sort(got[2:])
	if !slices.Equal(got, want) {
		t.Errorf("mounts = %q, want %q (deepest first, nothing outside the dir)", got, want)
	}
}

func TestSweepRemovesThePodMasquerade(t *testing.T) {
	needs.Root(t)
	runcBin := needs.Binary(t, "runc", "runc")
	needs.Binary(t, "iptables", "iptables")
	const bridge = "ksweep9"
	chain := "KUBETTE-MASQ-" + bridge
	comment := "kubette: masquerade the pods of bridge " + bridge
	ipt := func(args ...string) error {
		out, err := exec.Command("iptables", append([]string{"-w", "-t", "nat"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %q: %w: %s", args, err, out)
		}
		return nil
	}
	jump := []string{"POSTROUTING", "-s", "10.89.77.0/24", "-m", "comment", "--comment", comment, "-j", chain}
	t.Cleanup(func() { // whatever the test left
		for ipt(append([]string{"-D"}, jump...)...) == nil {
		}
		_ = ipt("-F", chain)
		_ = ipt("-X", chain)
	})
	// What a runtime whose data dir is gone left behind: the chain and its jump.
	for _, args := range [][]string{
		{"-N", chain},
		{"-A", chain, "!", "-d", "224.0.0.0/4", "-m", "comment", "--comment", comment, "-j", "MASQUERADE"},
		append([]string{"-A"}, jump...),
	} {
		if err := ipt(args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := sweep(context.Background(), runcBin, t.TempDir(), bridge); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	out, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	if strings.Contains(string(out), chain) {
		t.Errorf("the masquerade of %s is left after sweep:\n%s", bridge, out)
	}
}

// TestRemoveOrphanWritables: the sweep removes the writable layers whose container directory
// is gone (with the containers tmpfs it unmounted) and keeps the others.
func TestRemoveOrphanWritables(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"writable/gone/upper/f", "writable/kept/upper/f", "containers/kept/meta.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeOrphanWritables(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "writable", "gone")); !os.IsNotExist(err) {
		t.Errorf("orphan writable layer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "writable", "kept", "upper", "f")); err != nil {
		t.Errorf("the writable layer of a container with a directory: %v", err)
	}
	if err := removeOrphanWritables(t.TempDir()); err != nil {
		t.Errorf("no writable directory: %v", err)
	}
}

func TestRemoveEmptyPodCgroupsOnPlainDirs(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("memory/kubette/pod-empty")
	mk("memory/kubette/pod-running/ctr")
	mk("cpu/kubette/pod-empty")
	mk("pids/other/pod-x") // not kubette's
	mk("blkio")            // a hierarchy without kubette
	if err := os.WriteFile(filepath.Join(root, "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err) // a file beside the hierarchies is skipped
	}
	if err := removeEmptyPodCgroups(root); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"memory/kubette/pod-empty":       false,
		"memory/kubette/pod-running/ctr": true,
		"memory/kubette":                 true,
		"cpu/kubette/pod-empty":          false,
		"cpu/kubette":                    false, // left empty: removed too
		"pids/other/pod-x":               true,
		"blkio":                          true,
	} {
		if _, err := os.Stat(filepath.Join(root, p)); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", p, err == nil, want)
		}
	}
	if err := removeEmptyPodCgroups(filepath.Join(root, "missing")); err != nil {
		t.Errorf("a missing cgroup root: %v", err)
	}
}

// TestRemoveEmptyPodCgroupsOnCgroupfs runs the sweep over a named cgroup v1 hierarchy of its
// own (not the machine's, where other tests' clusters have pods): an empty pod cgroup goes,
// one with a process or a child cgroup stays.
func TestRemoveEmptyPodCgroupsOnCgroupfs(t *testing.T) {
	needs.Root(t)
	root := t.TempDir()
	h := filepath.Join(root, "test")
	if err := os.Mkdir(h, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("kubette-sweep-%d", os.Getpid())
	if out, err := exec.Command("mount", "-t", "cgroup", "-o", "none,name="+name, "cgroup", h).CombinedOutput(); err != nil {
		t.Fatalf("mount a named cgroup v1 hierarchy: %v: %s", err, out)
	}
	sleep := exec.Command("sleep", "60")
	t.Cleanup(func() {
		if sleep.Process != nil {
			_ = sleep.Process.Kill()
			_ = sleep.Wait()
		}
		for _, d := range []string{"kubette/pod-child/ctr", "kubette/pod-child", "kubette/pod-busy", "kubette/pod-empty", "kubette"} {
			_ = os.Remove(filepath.Join(h, d))
		}
		_ = exec.Command("umount", h).Run()
	})
	for _, d := range []string{"kubette/pod-empty", "kubette/pod-busy", "kubette/pod-child/ctr"} {
		if err := os.MkdirAll(filepath.Join(h, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h, "kubette/pod-busy/cgroup.procs"), []byte(fmt.Sprint(sleep.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeEmptyPodCgroups(root); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{"kubette/pod-empty": false, "kubette/pod-busy": true, "kubette/pod-child/ctr": true, "kubette": true} {
		if _, err := os.Stat(filepath.Join(h, d)); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", d, err == nil, want)
		}
	}
}
