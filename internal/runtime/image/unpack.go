package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
)

// decompress returns the uncompressed stream of a layer blob: gzip, zstd or a plain tar,
// told apart by their magic numbers.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), nil
	default:
		return io.NopCloser(br), nil
	}
}

// unpack applies the layer tar r into the existing directory root, the way overlayfs wants
// a lower layer: a whiteout ".wh.NAME" becomes a 0/0 character device NAME and an opaque
// marker ".wh..wh..opq" the xattr trusted.overlay.opaque=y on its directory. Modes,
// ownership, times, xattrs, symlinks and hard links (to files of this layer) are kept;
// device nodes and FIFOs that cannot be created are skipped. Entries whose path leaves root
// or goes through a symlink are refused, and nothing is ever written through a symlink.
func unpack(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	type dirTimes struct {
		path  string
		atime time.Time
		mtime time.Time
	}
	var dirs []dirTimes
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		if isSparse(hdr) {
			// Holes would be written out as zeros: a few bytes of tar could fill the disk.
			// Image builders do not write sparse files.
			return fmt.Errorf("layer entry %q: sparse files are not supported", hdr.Name)
		}
		rel, err := cleanName(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "" { // the layer's root directory itself
			if hdr.Typeflag == tar.TypeDir {
				if err := setAttrs(root, hdr); err != nil {
					return err
				}
				dirs = append(dirs, dirTimes{root, hdr.AccessTime, hdr.ModTime})
			}
			continue
		}
		parentRel, base := path.Split(rel)
		parent, err := makeParents(root, parentRel)
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if strings.HasPrefix(base, whiteoutPrefix) {
			if err := whiteout(parent, base); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			continue
		}
		target := filepath.Join(parent, base)
		if err := replaceExisting(target, hdr.Typeflag == tar.TypeDir); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		created := true
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			dirs = append(dirs, dirTimes{target, hdr.AccessTime, hdr.ModTime})
		case tar.TypeReg, tar.TypeRegA:
			if err := writeFile(target, tr); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			src, err := linkSource(root, hdr.Linkname)
			if err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			if err := os.Link(src, target); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			continue // a hard link shares its source's attributes
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			created = mknod(target, hdr) == nil
		default:
			created = false // pax/GNU metadata entries and unknown types carry no file
		}
		if !created {
			continue
		}
		if err := setAttrs(target, hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeDir { // directories get their times at the end
			if err := setTimes(target, hdr.AccessTime, hdr.ModTime); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
		}
	}
	// Directory times last: creating their entries changed them.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := setTimes(dirs[i].path, dirs[i].atime, dirs[i].mtime); err != nil {
			return fmt.Errorf("set times of %s: %w", dirs[i].path, err)
		}
	}
	return nil
}

// isSparse reports whether hdr is a GNU sparse file (old GNU format or GNU's PAX records).
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// cleanName turns a tar entry name into a slash-separated path relative to the layer root
// ("" for the root itself) and refuses names that climb out of it.
func cleanName(name string) (string, error) {
	p := path.Clean(name)
	if path.IsAbs(p) {
		p = strings.TrimLeft(p, "/")
	}
	switch {
	case p == "." || p == "":
		return "", nil
	case p == ".." || strings.HasPrefix(p, "../"):
		return "", fmt.Errorf("layer entry %q escapes the layer root", name)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("layer entry %q: NUL in name", name)
	}
	return p, nil
}

// makeParents makes sure every directory of rel (slash-separated, relative) exists below
// root as a real directory, creating missing ones, and returns its path. A symlink or a
// non-directory on the way is an error: nothing is written through a symlink.
func makeParents(root, rel string) (string, error) {
	cur := root
	for _, c := range strings.Split(rel, "/") {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", fmt.Errorf("parent %s is a symlink", c)
		case !fi.IsDir():
			return "", fmt.Errorf("parent %s is not a directory", c)
		}
	}
	return cur, nil
}

// linkSource resolves a hard link's target inside root without following symlinks on the
// way; the target must already exist in this layer and must not be a directory.
func linkSource(root, linkname string) (string, error) {
	rel, err := cleanName(linkname)
	if err != nil {
		return "", err
	}
	if rel == "" {
		return "", fmt.Errorf("hard link to the layer root")
	}
	cur := root
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", fmt.Errorf("hard link target %s: %w", linkname, err)
		}
		last := i == len(parts)-1
		if !last && !fi.IsDir() { // also refuses a symlink on the way
			return "", fmt.Errorf("hard link target %s: %s is not a directory", linkname, c)
		}
		if last && fi.IsDir() {
			return "", fmt.Errorf("hard link target %s is a directory", linkname)
		}
	}
	return cur, nil
}

// replaceExisting removes what target holds, unless both it and the new entry are
// directories (then the entry only updates the directory's attributes).
func replaceExisting(target string, isDir bool) error {
	fi, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if isDir && fi.IsDir() {
		return nil
	}
	return os.RemoveAll(target)
}

// whiteout converts an OCI whiteout entry named base inside the directory parent.
func whiteout(parent, base string) error {
	if base == whiteoutOpaque {
		if err := unix.Lsetxattr(parent, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %s opaque: %w", parent, err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		return nil // other AUFS metadata (.wh..wh.plnk, ...) has no meaning for overlay
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("invalid whiteout %q", base)
	}
	target := filepath.Join(parent, name)
	if err := os.RemoveAll(target); err != nil {
		return err
	}
	if err := unix.Mknod(target, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("whiteout %s: %w", target, err)
	}
	return ignorePerm(unix.Lchown(target, 0, 0))
}

// writeFile creates target (which must not exist; never following a symlink) with the
// content of r.
func writeFile(target string, r io.Reader) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mknod creates a device node or FIFO; callers skip the entry when it fails (no
// CAP_MKNOD in a user namespace, for example).
func mknod(target string, hdr *tar.Header) error {
	mode := uint32(hdr.Mode & 0o7777)
	switch hdr.Typeflag {
	case tar.TypeChar:
		mode |= unix.S_IFCHR
	case tar.TypeBlock:
		mode |= unix.S_IFBLK
	case tar.TypeFifo:
		mode |= unix.S_IFIFO
	}
	return unix.Mknod(target, mode, int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))))
}

// setAttrs applies ownership, mode and xattrs of hdr to target (which unpack created, so it
// is not a symlink unless hdr is one). Ownership first: chown clears set-id bits.
func setAttrs(target string, hdr *tar.Header) error {
	if err := ignorePerm(unix.Lchown(target, hdr.Uid, hdr.Gid)); err != nil {
		return fmt.Errorf("chown %s: %w", hdr.Name, err)
	}
	if hdr.Typeflag != tar.TypeSymlink {
		mode := hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		if err := os.Chmod(target, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", hdr.Name, err)
		}
	}
	for k, v := range hdr.PAXRecords {
		key, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok || strings.HasPrefix(key, "trusted.overlay.") { // a layer must not steer overlayfs
			continue
		}
		err := unix.Lsetxattr(target, key, []byte(v), 0)
		if err != nil && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("xattr %s of %s: %w", key, hdr.Name, err)
		}
	}
	return nil
}

// setTimes sets atime and mtime without following a symlink; a zero atime means mtime.
func setTimes(target string, atime, mtime time.Time) error {
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if mtime.IsZero() {
		return nil
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// ignorePerm drops EPERM, which an unprivileged store gets for foreign ownership.
func ignorePerm(err error) error {
	if errors.Is(err, unix.EPERM) {
		return nil
	}
	return err
}
