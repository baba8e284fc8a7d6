package runtime

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// volatileDirs are the directories below DATA_DIR/runtime whose contents describe only what
// runs now and die with it at a reboot: runc's state (runc --root), the sandboxes' records
// and files (meta.json, hostname, hosts, resolv.conf), the containers' directories (meta.json,
// the bundle's config.json and the rootfs mount point, the shim's and runc's small files, the
// started marker, exec-*/), the network namespaces' bind mounts and the CNI state (the
// conflist, host-local's address reservations, the sandboxes' network records, libcni's
// cache). Run mounts a tmpfs on each, as containerd keeps its runc root and task bundles below
// /run and iproute2 its namespaces in /run/netns: every pod's start creates and replaces files
// there (runc's state.json and exec FIFO, the sandbox's files, the container's, the records
// written through a temporary file and fsynced, host-local's reservation, libcni's result),
// and on a disk file system each new inode and fsync costs CPU (on ext4 without a journal the
// allocator also skips every inode freed in the last half minute, which pod churn makes
// expensive). Images, the containers' writable layers (writable/<id>/, which may grow to
// gigabytes) and logs stay on disk.
//
// size caps each tmpfs (memory is used only as files fill it): runc's state is a few KB per
// container, a sandbox's files and its network state about as much, a container's directory
// 10–20 KB (its config.json most of it).
var volatileDirs = []struct {
	name string
	mode uint32
	size string
}{{"runc", 0o711, "64m"}, {"sandboxes", 0o755, "64m"}, {"containers", 0o711, "256m"}, {"netns", 0o700, "64m"}, {"cni", 0o700, "64m"}}

// mountVolatile mounts a tmpfs on each of dir's volatileDirs that is not one already. A
// directory that holds entries on disk (records of a kubette that did not mount it: its pods
// may still run) is left as it is, and so is one another file system is mounted on; Run works
// either way, only the files cost more. The sweep of `kubette down` unmounts them.
func mountVolatile(dir string, log *slog.Logger) error {
	for _, d := range volatileDirs {
		p := filepath.Join(dir, d.name)
		if err := os.MkdirAll(p, os.FileMode(d.mode)); err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			return fmt.Errorf("runtime: statfs %s: %w", p, err)
		}
		if st.Type == unix.TMPFS_MAGIC {
			continue
		}
		mounted, err := isMountPoint(p)
		if err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
		if mounted || len(entries) > 0 {
			log.Info("runtime state stays on disk", "dir", p, "mountPoint", mounted, "entries", len(entries))
			continue
		}
		opts := fmt.Sprintf("mode=%o,size=%s", d.mode, d.size)
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("runtime: mount a tmpfs on %s: %w", p, err)
		}
	}
	return nil
}

// isMountPoint reports whether p is the root of a mount: its device differs from its
// parent's (or it is /).
func isMountPoint(p string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", p, err)
	}
	if err := unix.Lstat(filepath.Dir(p), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(p), err)
	}
	return st.Dev != parent.Dev || st.Ino == parent.Ino, nil
}
