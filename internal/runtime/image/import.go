package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// names are the references an imported image gets.
type names struct {
	tags, digests []string
}

// holdOffGC keeps garbage collection (of any process) away until release is called:
// imports hold it while their blobs and temporary files are not yet in the index.
func (s *Store) holdOffGC() (release func(), err error) {
	return lockFile(filepath.Join(s.dir, "gc.lock"), unix.LOCK_SH)
}

// importImage stores img: its layer blobs, each layer unpacked once, its config and
// manifest, and then its record with the given names. The caller holds off GC.
func (s *Store) importImage(ctx context.Context, img v1.Image, n names) (Image, error) {
	rawManifest, err := img.RawManifest()
	if err != nil {
		return Image{}, fmt.Errorf("manifest: %w", err)
	}
	manifest, err := v1.ParseManifest(bytes.NewReader(rawManifest))
	if err != nil {
		return Image{}, fmt.Errorf("parse manifest: %w", err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return Image{}, fmt.Errorf("config: %w", err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(rawConfig, &cfg); err != nil {
		return Image{}, fmt.Errorf("parse config: %w", err)
	}
	configDigest := digestOf(rawConfig)
	if manifest.Config.Digest.String() != configDigest {
		return Image{}, fmt.Errorf("config digest %s does not match the manifest's %s", configDigest, manifest.Config.Digest)
	}
	if len(cfg.RootFS.DiffIDs) != len(manifest.Layers) {
		return Image{}, fmt.Errorf("manifest has %d layers but the config %d diff IDs", len(manifest.Layers), len(cfg.RootFS.DiffIDs))
	}
	layers, err := img.Layers()
	if err != nil {
		return Image{}, fmt.Errorf("layers: %w", err)
	}
	if len(layers) != len(manifest.Layers) {
		return Image{}, fmt.Errorf("image has %d layers, its manifest %d", len(layers), len(manifest.Layers))
	}

	rec := record{ID: configDigest, Manifest: digestOf(rawManifest), RepoTags: n.tags, RepoDigests: n.digests,
		Size: uint64(len(rawConfig))}
	for i, desc := range manifest.Layers {
		if err := ctx.Err(); err != nil {
			return Image{}, err
		}
		diffID := cfg.RootFS.DiffIDs[i].String()
		blob := desc.Digest.String()
		if err := s.writeBlob(blob, func() (io.ReadCloser, error) { return layers[i].Compressed() }); err != nil {
			return Image{}, fmt.Errorf("layer %s: %w", blob, err)
		}
		if err := s.unpackLayer(diffID, blob); err != nil {
			return Image{}, fmt.Errorf("layer %s: %w", blob, err)
		}
		rec.Layers = append(rec.Layers, diffID)
		rec.Blobs = append(rec.Blobs, blob)
		rec.Size += uint64(desc.Size)
	}
	for _, b := range [][]byte{rawConfig, rawManifest} {
		if err := s.writeBlob(digestOf(b), func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }); err != nil {
			return Image{}, err
		}
	}
	rec.Blobs = append(rec.Blobs, rec.ID, rec.Manifest)
	if err := s.update(func(recs []record) ([]record, error) { return upsert(recs, rec), nil }); err != nil {
		return Image{}, err
	}
	recs, err := s.index()
	if err != nil {
		return Image{}, err
	}
	i, err := find(recs, rec.ID)
	if err != nil {
		return Image{}, err
	}
	return s.image(recs[i])
}

// writeBlob stores the blob with this digest unless the store has it: the content goes to
// a temporary file, is checked against the digest and renamed into place.
func (s *Store) writeBlob(digest string, open func() (io.ReadCloser, error)) error {
	dst := s.blobPath(digest)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.CreateTemp(s.tmpDir(), "blob-*")
	if err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), rc); err != nil {
		f.Close()
		return fmt.Errorf("write blob %s: %w", digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		f.Close()
		return fmt.Errorf("blob %s: content has digest %s", digest, got)
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
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("write blob %s: %w", digest, err)
	}
	return nil
}

// unpackLayer makes layers/<diffID hex> from the stored blob, unless it exists: the layer
// is unpacked into a temporary directory, its diffID checked, and the directory renamed
// into place.
func (s *Store) unpackLayer(diffID, blob string) error {
	dst := s.layerPath(diffID)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	f, err := os.Open(s.blobPath(blob))
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := decompress(f)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.MkdirTemp(s.tmpDir(), "layer-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left to remove
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	h := sha256.New()
	tee := io.TeeReader(rc, h)
	if err := unpack(tee, tmp); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if _, err := io.Copy(io.Discard, tee); err != nil { // the tar's padding counts too
		return fmt.Errorf("unpack: %w", err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID {
		return fmt.Errorf("uncompressed layer has digest %s, the config says %s", got, diffID)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, statErr := os.Stat(dst); statErr == nil {
			return nil // another writer was first
		}
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return fmt.Errorf("unpack: %w", err)
	}
	return nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
