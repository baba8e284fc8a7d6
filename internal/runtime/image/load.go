package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// OCI annotations that name an image in a layout's index.json.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// Load stores every image of a docker-archive tarball (what `docker save` and
// go-containerregistry's tarball.Write produce) or an OCI image layout tarball, optionally
// gzip- or zstd-compressed, keeping their names. Of a multi-platform index in a layout it
// stores the manifest for linux on this machine's architecture.
func (s *Store) Load(ctx context.Context, r io.Reader) ([]Image, error) {
	imgs, err := s.load(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("load images: %w", err)
	}
	return imgs, nil
}

func (s *Store) load(ctx context.Context, r io.Reader) ([]Image, error) {
	release, err := s.holdOffGC()
	if err != nil {
		return nil, err
	}
	defer release()
	rc, err := decompress(r)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	f, err := os.CreateTemp(s.tmpDir(), "load-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, ctxReader{ctx, rc}); err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	hasManifest, hasIndex, err := archiveKind(f)
	if err != nil {
		return nil, err
	}
	switch {
	case hasManifest:
		return s.loadDockerArchive(ctx, f.Name())
	case hasIndex:
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return s.loadLayout(ctx, f)
	default:
		return nil, errors.New("neither a docker-archive (manifest.json) nor an OCI image layout (index.json)")
	}
}

// archiveKind tells which of manifest.json (docker-archive) and index.json (OCI layout)
// the archive has at its top.
func archiveKind(r io.Reader) (hasManifest, hasIndex bool, err error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hasManifest, hasIndex, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("read archive: %w", err)
		}
		switch strings.TrimPrefix(path.Clean(h.Name), "/") {
		case "manifest.json":
			hasManifest = true
		case "index.json":
			hasIndex = true
		}
	}
}

// loadDockerArchive stores the images of manifest.json, each under all its RepoTags.
func (s *Store) loadDockerArchive(ctx context.Context, file string) ([]Image, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("docker-archive manifest.json: %w", err)
	}
	var out []Image
	for _, d := range m {
		var tag *name.Tag
		var n names
		for _, t := range d.RepoTags {
			r, err := parseReference(t)
			if err != nil || r.tag == "" {
				return nil, fmt.Errorf("docker-archive: bad tag %q", t)
			}
			n.tags = append(n.tags, r.String())
			if tag == nil {
				gt, err := name.NewTag(t)
				if err != nil {
					return nil, fmt.Errorf("docker-archive: bad tag %q: %w", t, err)
				}
				tag = &gt
			}
		}
		if tag == nil && len(m) > 1 {
			return nil, fmt.Errorf("docker-archive: %d images, and the one with config %s has no tag to tell it apart", len(m), d.Config)
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("docker-archive image %s: %w", d.Config, err)
		}
		stored, err := s.importImage(ctx, img, n)
		if err != nil {
			return nil, fmt.Errorf("docker-archive image %s: %w", d.Config, err)
		}
		out = append(out, stored)
	}
	return s.refresh(out), nil
}

// loadLayout unpacks an OCI layout tarball into a temporary directory and stores the image
// of every entry of its index.json.
func (s *Store) loadLayout(ctx context.Context, r io.Reader) ([]Image, error) {
	dir, err := os.MkdirTemp(s.tmpDir(), "layout-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := unpack(r, dir); err != nil {
		return nil, fmt.Errorf("OCI layout: %w", err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout index.json: %w", err)
	}
	var out []Image
	for _, d := range im.Manifests {
		img, err := platformImage(idx, d)
		if err != nil {
			return nil, fmt.Errorf("OCI layout entry %s: %w", d.Digest, err)
		}
		if img == nil {
			continue // another platform
		}
		var n names
		if ref, ok := layoutName(d.Annotations); ok {
			if ref.tag != "" {
				n.tags = []string{ref.String()}
			}
			n.digests = []string{ref.repo + "@" + d.Digest.String()}
		}
		stored, err := s.importImage(ctx, img, n)
		if err != nil {
			return nil, fmt.Errorf("OCI layout entry %s: %w", d.Digest, err)
		}
		out = append(out, stored)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("OCI layout: no image for linux/%s", runtime.GOARCH)
	}
	return s.refresh(out), nil
}

// platformImage returns the image a layout index entry stands for: the image itself, or
// for a nested index the manifest for linux on this architecture; nil if the entry is for
// another platform.
func platformImage(idx v1.ImageIndex, d v1.Descriptor) (v1.Image, error) {
	want := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	switch {
	case d.MediaType.IsImage():
		if d.Platform != nil && !d.Platform.Satisfies(want) {
			return nil, nil
		}
		return idx.Image(d.Digest)
	case d.MediaType.IsIndex():
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		cm, err := child.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, c := range cm.Manifests {
			if c.MediaType.IsImage() && (c.Platform == nil || c.Platform.Satisfies(want)) {
				return child.Image(c.Digest)
			}
		}
		return nil, nil
	default:
		return nil, nil // attestations, signatures and other artifacts
	}
}

// layoutName reads an image's name from a layout's annotations: containerd's full name,
// or org.opencontainers.image.ref.name when that is a whole reference (a bare tag such as
// "latest" names no repository, and the image stays unnamed).
func layoutName(a map[string]string) (reference, bool) {
	for _, key := range []string{annotationContainerdName, annotationRefName} {
		v := a[key]
		if v == "" || (key == annotationRefName && !strings.ContainsAny(v, "/:@")) {
			continue
		}
		if r, err := parseReference(v); err == nil {
			return r, true
		}
	}
	return reference{}, false
}

// refresh re-reads images after a load: a later image of the same archive may have taken
// a name from an earlier one. Each image is returned once.
func (s *Store) refresh(imgs []Image) []Image {
	var out []Image
	seen := map[string]bool{}
	for _, img := range imgs {
		if seen[img.ID] {
			continue
		}
		seen[img.ID] = true
		if cur, err := s.Get(img.ID); err == nil {
			out = append(out, cur)
		}
	}
	return out
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
