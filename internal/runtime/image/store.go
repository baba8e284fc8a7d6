// Package image is the image store of kubette's built-in container runtime: it pulls images
// over the OCI distribution protocol, loads docker-archive and OCI-layout tarballs, keeps
// blobs and an index of image names on disk, unpacks every layer once into its own
// directory (OCI whiteouts converted to overlayfs's form) and mounts a container's rootfs
// as an overlay of those layer directories.
//
// On-disk layout under the store's directory:
//
//	blobs/sha256/<hex>   manifests, configs and compressed layers
//	index.json           image records (ID, names, manifest, layers, blobs)
//	layers/<diffID hex>/ one unpacked layer, shared by every image that has it
//	tmp/                 work in progress, renamed into place when complete
//	lock, gc.lock        flock files that let several processes share the store
//
// Several processes may use one store at once (`kubette image load` while the runtime
// runs). Blobs and layers are written to tmp/ and renamed into place, so a crash never
// leaves half of one, and two writers of the same content simply race to the rename.
// index.json is changed only under an exclusive flock on lock, written to a temporary file
// and renamed, and re-read whenever its inode, size or mtime changed. Imports hold a shared
// flock on gc.lock while their blobs are not yet in the index; garbage collection takes it
// exclusively and is skipped when it cannot.
package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
)

// ErrNotFound is returned (wrapped) when no image matches a reference.
var ErrNotFound = errors.New("image not found")

// Image is what the store knows about one image.
type Image struct {
	ID          string              // "sha256:<config digest hex>"
	RepoTags    []string            // "localhost:5000/app:v1"
	RepoDigests []string            // "localhost:5000/app@sha256:..."
	Size        uint64              // sum of compressed layers + config
	Config      ocispec.ImageConfig // the image's runtime configuration
}

// Store is an image store in one directory. It is safe for concurrent use, also by several
// processes at once.
type Store struct {
	dir    string
	flight singleflight.Group // one pull per reference at a time in this process

	mu      sync.Mutex // guards the fields below
	records []record   // index.json as last read
	stamp   fileStamp  // which index.json records came from
	configs map[string]ocispec.Image
}

// Open opens (creating if needed) the image store in dir.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open image store %q: %w", dir, err)
	}
	for _, d := range []string{filepath.Join("blobs", "sha256"), "layers", "tmp", "empty"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("open image store %q: %w", dir, err)
		}
	}
	s := &Store{dir: abs, configs: map[string]ocispec.Image{}}
	if _, err := s.index(); err != nil {
		return nil, fmt.Errorf("open image store %q: %w", dir, err)
	}
	if err := s.cleanTmp(); err != nil {
		return nil, fmt.Errorf("open image store %q: %w", dir, err)
	}
	return s, nil
}

// cleanTmp removes what a crashed process left in tmp/, unless some process is importing
// (then its files are there, and a later garbage collection cleans up).
func (s *Store) cleanTmp() error {
	unlock, err := lockFile(filepath.Join(s.dir, "gc.lock"), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	unlockIndex, err := lockFile(filepath.Join(s.dir, "lock"), unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlockIndex()
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(s.tmpDir(), e.Name())))
	}
	return errors.Join(errs...)
}

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func (s *Store) layerPath(diffID string) string {
	return filepath.Join(s.dir, "layers", strings.TrimPrefix(diffID, "sha256:"))
}

func (s *Store) tmpDir() string { return filepath.Join(s.dir, "tmp") }

// Get returns the image that ref names: name[:tag] (with docker.io/library/ and :latest
// filled in as CRI does), name@digest, the image ID with or without "sha256:", or a unique
// prefix of the ID.
func (s *Store) Get(ref string) (Image, error) {
	recs, err := s.index()
	if err != nil {
		return Image{}, err
	}
	i, err := find(recs, ref)
	if err != nil {
		return Image{}, err
	}
	return s.image(recs[i])
}

// List returns every image, ordered by ID. Images whose config cannot be read are left out.
func (s *Store) List() []Image {
	recs, err := s.index()
	if err != nil {
		return nil
	}
	out := make([]Image, 0, len(recs))
	for _, r := range recs {
		if img, err := s.image(r); err == nil {
			out = append(out, img)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// image turns a record into an Image, reading (and caching) its config blob.
func (s *Store) image(r record) (Image, error) {
	cfg, err := s.config(r.ID)
	if err != nil {
		return Image{}, err
	}
	return Image{
		ID:          r.ID,
		RepoTags:    append([]string(nil), r.RepoTags...),
		RepoDigests: append([]string(nil), r.RepoDigests...),
		Size:        r.Size,
		Config:      cfg.Config,
	}, nil
}

// config returns the parsed config blob of the image with this ID.
func (s *Store) config(id string) (ocispec.Image, error) {
	s.mu.Lock()
	c, ok := s.configs[id]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := readConfig(s.blobPath(id))
	if err != nil {
		return ocispec.Image{}, fmt.Errorf("image %s: %w", id, err)
	}
	s.mu.Lock()
	s.configs[id] = c
	s.mu.Unlock()
	return c, nil
}
