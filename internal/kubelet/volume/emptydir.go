package volume

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// setupEmptyDir creates an emptyDir's directory (mode 0777, as upstream) and, for medium
// Memory, mounts a tmpfs on it sized by sizeLimit. With an fsGroup the directory belongs to
// that group and is setgid, so that what containers create there does too. A second call
// leaves an existing directory and mount alone.
func setupEmptyDir(dir string, src *v1.EmptyDirVolumeSource, gid *int64) error {
	switch src.Medium {
	case v1.StorageMediumDefault, v1.StorageMediumMemory:
	default:
		return fmt.Errorf("emptyDir medium %q is not supported on this node", src.Medium)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create emptyDir %s: %w", dir, err)
	}
	if src.Medium == v1.StorageMediumMemory {
		size := ""
		if src.SizeLimit != nil && src.SizeLimit.Value() > 0 {
			size = strconv.FormatInt(src.SizeLimit.Value(), 10)
		}
		if err := ensureTmpfs(dir, "0777", size); err != nil {
			return err
		}
	}
	mode := os.FileMode(0o777)
	if gid != nil {
		if err := os.Lchown(dir, -1, int(*gid)); err != nil {
			return fmt.Errorf("chown emptyDir %s: %w", dir, err)
		}
		mode |= os.ModeSetgid
	}
	// MkdirAll's mode is masked by the umask; an emptyDir is writable by every container user.
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("chmod emptyDir %s: %w", dir, err)
	}
	return nil
}

// ensureTmpfs creates dir and mounts a tmpfs on it (with the octal mode, and of size bytes
// when set) unless one is there already.
func ensureTmpfs(dir, mode, size string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	opts := "mode=" + mode
	if size != "" {
		opts += ",size=" + size
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}
