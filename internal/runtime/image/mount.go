package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount mounts the rootfs of a container of the image imageID (any reference Get takes) at
// containerDir/bundle/rootfs: an overlay whose lower directories are the image's layers,
// topmost first, with the writable layer (upper/ and work/) in writableDir. The two may lie
// on different file systems: the container directory holds only small files (on a tmpfs in
// kubette's runtime) while the writable layer, which a container may fill with gigabytes, is
// on disk. Mount creates the directories it needs, and an already mounted rootfs is left as
// it is. An image without layers gets an empty lower directory.
//
// The overlay options must fit in one page (4 KiB): with the default data directory that
// is about 40 layers.
func (s *Store) Mount(imageID, containerDir, writableDir string) (rootfs string, err error) {
	recs, err := s.index()
	if err != nil {
		return "", err
	}
	i, err := find(recs, imageID)
	if err != nil {
		return "", fmt.Errorf("mount rootfs of %s: %w", imageID, err)
	}
	rec := recs[i]
	containerDir, err = filepath.Abs(containerDir)
	if err != nil {
		return "", fmt.Errorf("mount rootfs of %s: %w", imageID, err)
	}
	writableDir, err = filepath.Abs(writableDir)
	if err != nil {
		return "", fmt.Errorf("mount rootfs of %s: %w", imageID, err)
	}
	rootfs = filepath.Join(containerDir, "bundle", "rootfs")
	upper := filepath.Join(writableDir, "upper")
	work := filepath.Join(writableDir, "work")
	for _, d := range []string{rootfs, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("mount rootfs of %s: %w", imageID, err)
		}
	}
	if mounted, err := isMountPoint(rootfs); err != nil {
		return "", fmt.Errorf("mount rootfs of %s: %w", imageID, err)
	} else if mounted {
		return rootfs, nil
	}
	var lowers []string
	for j := len(rec.Layers) - 1; j >= 0; j-- {
		l := s.layerPath(rec.Layers[j])
		if _, err := os.Stat(l); err != nil {
			return "", fmt.Errorf("mount rootfs of %s: layer %s: %w", imageID, rec.Layers[j], err)
		}
		lowers = append(lowers, l)
	}
	if len(lowers) == 0 {
		lowers = []string{filepath.Join(s.dir, "empty")}
	}
	for _, p := range append([]string{upper, work}, lowers...) {
		if strings.ContainsAny(p, ":,") {
			return "", fmt.Errorf("mount rootfs of %s: overlay cannot take the path %q (it has ':' or ',')", imageID, p)
		}
	}
	data := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work
	if len(data) >= os.Getpagesize() {
		return "", fmt.Errorf("mount rootfs of %s: %d layers make overlay options of %d bytes, more than a page", imageID, len(lowers), len(data))
	}
	if err := unix.Mount("overlay", rootfs, "overlay", 0, data); err != nil {
		return "", fmt.Errorf("mount rootfs of %s at %s: %w", imageID, rootfs, err)
	}
	return rootfs, nil
}

// Unmount unmounts containerDir/bundle/rootfs; a rootfs that is not mounted (or does not
// exist) is fine. A busy mount is detached lazily.
func (s *Store) Unmount(containerDir string) error {
	rootfs := filepath.Join(containerDir, "bundle", "rootfs")
	for range 16 { // mounts may be stacked
		mounted, err := isMountPoint(rootfs)
		if errors.Is(err, os.ErrNotExist) || (err == nil && !mounted) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", rootfs, err)
		}
		err = unix.Unmount(rootfs, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(rootfs, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", rootfs, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", rootfs)
}

// isMountPoint reports whether p is the root of a mount: a different device from its
// parent's, which holds for the overlay rootfs (overlayfs has its own anonymous device).
func isMountPoint(p string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, os.ErrNotExist
		}
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(p), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev || st.Ino == parent.Ino, nil
}
