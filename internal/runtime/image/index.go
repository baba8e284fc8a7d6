package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// record is one image in index.json.
type record struct {
	ID          string   `json:"id"` // "sha256:<config digest hex>"
	RepoTags    []string `json:"repoTags,omitempty"`
	RepoDigests []string `json:"repoDigests,omitempty"`
	Manifest    string   `json:"manifest"` // digest of the image manifest
	Size        uint64   `json:"size"`
	Layers      []string `json:"layers"` // diffIDs, bottom layer first
	Blobs       []string `json:"blobs"`  // every blob the image keeps: manifest, config, layers
}

// indexFile is the content of index.json.
type indexFile struct {
	Version int      `json:"version"`
	Images  []record `json:"images"`
}

// fileStamp identifies one version of index.json: writers rename a new file into place,
// which changes the inode (unless a freed inode number is reused), the ctime, and mostly the
// size and mtime.
type fileStamp struct {
	ino, size, mtimeNs, ctimeNs int64
}

func stampOf(fi fs.FileInfo) fileStamp {
	st := fi.Sys().(*syscall.Stat_t)
	return fileStamp{ino: int64(st.Ino), size: fi.Size(), mtimeNs: fi.ModTime().UnixNano(),
		ctimeNs: st.Ctim.Sec*1e9 + st.Ctim.Nsec}
}

func (s *Store) indexPath() string { return filepath.Join(s.dir, "index.json") }

// index returns the records of index.json, re-reading the file when it changed.
func (s *Store) index() ([]record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.indexLocked()
}

func (s *Store) indexLocked() ([]record, error) {
	fi, err := os.Stat(s.indexPath())
	if errors.Is(err, fs.ErrNotExist) {
		s.records, s.stamp = nil, fileStamp{}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read image index: %w", err)
	}
	if st := stampOf(fi); st == s.stamp && s.stamp != (fileStamp{}) {
		return s.records, nil
	}
	for range 3 { // a writer may rename a new file in between the stat and the read
		f, err := os.Open(s.indexPath())
		if err != nil {
			return nil, fmt.Errorf("read image index: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read image index: %w", err)
		}
		var idx indexFile
		err = json.NewDecoder(f).Decode(&idx)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read image index %s: %w", s.indexPath(), err)
		}
		s.records, s.stamp = idx.Images, stampOf(fi)
		return s.records, nil
	}
	return nil, fmt.Errorf("read image index: keeps changing")
}

// update changes index.json under the store's exclusive lock: fn gets the current records
// (fresh from disk) and returns the new ones, which are written atomically.
func (s *Store) update(fn func([]record) ([]record, error)) error {
	unlock, err := lockFile(filepath.Join(s.dir, "lock"), unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stamp = fileStamp{} // always re-read under the lock
	cur, err := s.indexLocked()
	if err != nil {
		return err
	}
	next, err := fn(slices.Clone(cur))
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(indexFile{Version: 1, Images: next}, "", "  ")
	if err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	if err := writeFileAtomic(s.indexPath(), s.tmpDir(), b); err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	fi, err := os.Stat(s.indexPath())
	if err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	s.records, s.stamp = next, stampOf(fi)
	return nil
}

// writeFileAtomic writes b to a temporary file in tmpDir, syncs it and renames it to path.
func writeFileAtomic(path, tmpDir string, b []byte) error {
	f, err := os.CreateTemp(tmpDir, "file-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// lockFile takes a flock (unix.LOCK_EX or LOCK_SH, optionally | LOCK_NB) on path and
// returns its release.
func lockFile(path string, how int) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// find returns the index of the record ref names (see Store.Get).
func find(recs []record, ref string) (int, error) {
	hex := strings.TrimPrefix(ref, "sha256:")
	if isHex(hex) && len(hex) == 64 {
		for i, r := range recs {
			if r.ID == "sha256:"+hex {
				return i, nil
			}
		}
	}
	if n, err := parseReference(ref); err == nil {
		want := n.String()
		for i, r := range recs {
			if slices.Contains(r.RepoTags, want) || slices.Contains(r.RepoDigests, want) {
				return i, nil
			}
		}
	}
	if isHex(hex) && len(hex) < 64 {
		match := -1
		for i, r := range recs {
			if strings.HasPrefix(strings.TrimPrefix(r.ID, "sha256:"), hex) {
				if match >= 0 {
					return 0, fmt.Errorf("image %q: ambiguous ID prefix", ref)
				}
				match = i
			}
		}
		if match >= 0 {
			return match, nil
		}
	}
	return 0, fmt.Errorf("%w: %s", ErrNotFound, ref)
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// readConfig parses an image config blob.
func readConfig(path string) (ocispec.Image, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ocispec.Image{}, fmt.Errorf("read config: %w", err)
	}
	var c ocispec.Image
	if err := json.Unmarshal(b, &c); err != nil {
		return ocispec.Image{}, fmt.Errorf("parse config: %w", err)
	}
	return c, nil
}

// upsert adds the image r to recs, or merges its names into the record with the same ID.
// A name moves: it is taken from any other image, and an image that so loses its last name
// is dropped (its content is garbage-collected later), as containerd's names work.
func upsert(recs []record, r record) []record {
	names := append(slices.Clone(r.RepoTags), r.RepoDigests...)
	var out []record
	found := false
	for _, o := range recs {
		if o.ID == r.ID {
			o.RepoTags = union(o.RepoTags, r.RepoTags)
			o.RepoDigests = union(o.RepoDigests, r.RepoDigests)
			o.Manifest, o.Size, o.Layers, o.Blobs = r.Manifest, r.Size, r.Layers, union(o.Blobs, r.Blobs)
			out = append(out, o)
			found = true
			continue
		}
		hadNames := len(o.RepoTags)+len(o.RepoDigests) > 0
		o.RepoTags = without(o.RepoTags, names)
		o.RepoDigests = without(o.RepoDigests, names)
		if hadNames && len(o.RepoTags)+len(o.RepoDigests) == 0 {
			continue
		}
		out = append(out, o)
	}
	if !found {
		out = append(out, r)
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func without(a, drop []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}
