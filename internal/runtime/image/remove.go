package image

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Remove deletes the image ref names (all its tags and digests, as CRI's RemoveImage does)
// and then garbage-collects the blobs and layer directories no image references any more.
// A layer directory still used as a lower directory of a mounted overlay is kept, so
// running containers of a removed image keep working; it is collected by a later Remove.
// The garbage collection is skipped when an import holds the store (in any process); the
// next Remove catches up. It returns an error wrapping ErrNotFound for an unknown image.
func (s *Store) Remove(ref string) error {
	err := s.update(func(recs []record) ([]record, error) {
		i, err := find(recs, ref)
		if err != nil {
			return nil, err
		}
		return slices.Delete(recs, i, i+1), nil
	})
	if err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	if err := s.gc(); err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// gc deletes unreferenced blobs, unreferenced and unmounted layer directories and stale
// temporary files, if no import runs.
func (s *Store) gc() error {
	unlock, err := lockFile(filepath.Join(s.dir, "gc.lock"), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	// The index lock too: index.json's temporary file lives in tmp/.
	unlockIndex, err := lockFile(filepath.Join(s.dir, "lock"), unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlockIndex()
	s.mu.Lock()
	s.stamp = fileStamp{}
	recs, err := s.indexLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	blobs, layers := map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		for _, b := range r.Blobs {
			blobs[strings.TrimPrefix(b, "sha256:")] = true
		}
		for _, l := range r.Layers {
			layers[strings.TrimPrefix(l, "sha256:")] = true
		}
	}
	mounted, err := mountedLowerDirs()
	if err != nil {
		return err
	}
	var errs []error
	prune := func(dir string, keep func(name string) bool) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, e := range entries {
			if !keep(e.Name()) {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	prune(filepath.Join(s.dir, "blobs", "sha256"), func(n string) bool { return blobs[n] })
	layersDir := filepath.Join(s.dir, "layers")
	prune(layersDir, func(n string) bool { return layers[n] || mounted[filepath.Join(layersDir, n)] })
	prune(s.tmpDir(), func(string) bool { return false }) // no import runs: all of tmp/ is stale
	s.mu.Lock()
	for id := range s.configs {
		if !blobs[strings.TrimPrefix(id, "sha256:")] {
			delete(s.configs, id)
		}
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// mountedLowerDirs returns the lower directories of every overlay mounted on this machine
// (as this process's mount namespace sees them).
func mountedLowerDirs() (map[string]bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ... mount-point options - fstype source super-options
		_, after, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields := strings.Fields(after)
		if len(fields) < 3 || fields[0] != "overlay" {
			continue
		}
		for _, opt := range strings.Split(fields[2], ",") {
			if v, ok := strings.CutPrefix(opt, "lowerdir="); ok {
				for _, d := range strings.Split(v, ":") {
					out[unescapeMountinfo(d)] = true
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + (c - '0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Usage reports the disk space (allocated blocks) and inodes the store uses.
func (s *Store) Usage() (usedBytes, inodes uint64, err error) {
	seen := map[uint64]bool{}
	err = filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed while we walk
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		usedBytes += uint64(st.Blocks) * 512
		inodes++
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("image store usage: %w", err)
	}
	return usedBytes, inodes, nil
}
