package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kubette/kubette/internal/runtime/network"
	"github.com/kubette/kubette/internal/runtime/runc"
)

// sweep removes what the records of a data dir no longer name, so that `kubette down` leaves
// the machine clean even after a crash or a half-deleted data dir: every container still in
// runc's state under the data dir is killed and deleted, every mount below the data dir's
// runtime directory (root filesystems, network namespaces, the tmpfs mounts of volatile.go,
// after runc's containers are gone) is unmounted, deepest first, the writable layers whose
// container directory is gone with them are removed, the pod masquerade of the bridge (its nat
// chain and jumps) is removed, and so are the empty pod cgroups below /kubette
// (removeEmptyPodCgroups).
func sweep(ctx context.Context, runcBin, dir, bridge string) error {
	var errs []error
	if err := network.RemoveMasquerade(ctx, bridge); err != nil {
		errs = append(errs, err)
	}
	runcRoot := filepath.Join(dir, "runc")
	if ids, err := runcList(ctx, runcBin, runcRoot); err != nil {
		errs = append(errs, err)
	} else {
		for _, id := range ids {
			_ = exec.CommandContext(ctx, runcBin, "--root", runcRoot, "kill", id, "KILL").Run()
			if out, err := exec.CommandContext(ctx, runcBin, "--root", runcRoot, "delete", "--force", id).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("runc delete %s: %w: %s", id, err, bytes.TrimSpace(out)))
			}
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	if err := removeOrphanWritables(dir); err != nil {
		errs = append(errs, err)
	}
	// The pid namespace holders of sandboxes whose records are gone.
	if err := runc.KillPIDHoldersUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeEmptyPodCgroups(cgroupRoot); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cgroupRoot is where the cgroup v1 hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// removeEmptyPodCgroups removes, in every cgroup hierarchy below root, the pod cgroups below
// kubette/ that hold no cgroup of their own, then kubette/ itself if it is left empty. The
// runtime removes a sandbox's pod cgroup when it removes the sandbox; these are the ones a
// cluster stopped without `kubette down` (and its data dir then deleted) left behind, which
// every later cgroup creation under /kubette pays for (cpuset checks its siblings). A cgroup
// that still has processes or child cgroups (another cluster's running pod) is refused by
// the kernel and stays: only unexpected errors are returned.
func removeEmptyPodCgroups(root string) error {
	hierarchies, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sweep pod cgroups: %w", err)
	}
	var errs []error
	for _, h := range hierarchies {
		parent := filepath.Join(root, h.Name(), "kubette")
		pods, err := os.ReadDir(parent)
		if err != nil {
			continue // not a hierarchy, or no kubette cgroup in it
		}
		for _, pod := range pods {
			if !pod.IsDir() {
				continue
			}
			dir := filepath.Join(parent, pod.Name())
			if hasSubdir(dir) {
				continue
			}
			if err := removeCgroup(dir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := removeCgroup(parent); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroup removes a cgroup directory; one in use (processes or child cgroups: EBUSY,
// ENOTEMPTY) or already gone is not an error.
func removeCgroup(dir string) error {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// hasSubdir reports whether dir has a subdirectory (a child cgroup); an unreadable dir counts
// as having one, so that it is left alone.
func hasSubdir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// removeOrphanWritables removes dir/writable/<id> (a container's writable layer) when
// dir/containers/<id> does not exist: runc's containers the sweep deleted had no record, and
// their directories went with the containers tmpfs.
func removeOrphanWritables(dir string) error {
	ws, err := os.ReadDir(filepath.Join(dir, "writable"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read writable layers: %w", err)
	}
	var errs []error
	for _, e := range ws {
		if _, err := os.Lstat(filepath.Join(dir, "containers", e.Name())); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, "writable", e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove the writable layer of %s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// runcList returns the IDs of the containers in runc's state directory root.
func runcList(ctx context.Context, runcBin, root string) ([]string, error) {
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	out, err := exec.CommandContext(ctx, runcBin, "--root", root, "list", "--format", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if s := bytes.TrimSpace(out); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		if err := json.Unmarshal(s, &list); err != nil {
			return nil, fmt.Errorf("runc list: %w", err)
		}
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	return parseMountsUnder(f, dir)
}

func parseMountsUnder(r interface{ Read([]byte) (int, error) }, dir string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == strings.TrimSuffix(dir, "/") || strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(out), nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, ok := octal(s[i+1 : min(i+4, len(s))]); ok {
				b.WriteByte(n)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var n int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int(c-'0')
	}
	return byte(n), n < 256
}
