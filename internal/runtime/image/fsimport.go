package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImportOptions describe the image Import makes of a filesystem tarball.
type ImportOptions struct {
	// Cmd, Entrypoint, Env and WorkingDir become the image's configuration.
	Cmd, Entrypoint, Env []string
	WorkingDir           string
}

// Import makes a one-layer image of a plain tarball of a root filesystem (as `docker import`
// does) and stores it under ref. The tarball may be uncompressed or gzip-compressed.
func (s *Store) Import(ctx context.Context, tarPath, ref string, opts ImportOptions) (Image, error) {
	r, err := parseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("import %s: %w", tarPath, err)
	}
	if r.tag == "" {
		return Image{}, fmt.Errorf("import %s: %q names no tag", tarPath, ref)
	}
	if _, err := os.Stat(tarPath); err != nil {
		return Image{}, fmt.Errorf("import: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(tarPath) })
	if err != nil {
		return Image{}, fmt.Errorf("import %s: %w", tarPath, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return Image{}, fmt.Errorf("import %s: %w", tarPath, err)
	}
	env := opts.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: runtime.GOARCH, OS: "linux",
		Config: v1.Config{Cmd: opts.Cmd, Entrypoint: opts.Entrypoint, Env: env, WorkingDir: opts.WorkingDir},
		RootFS: mustRootFS(img),
	})
	if err != nil {
		return Image{}, fmt.Errorf("import %s: %w", tarPath, err)
	}
	stored, err := s.importImage(ctx, img, names{tags: []string{r.String()}})
	if err != nil {
		return Image{}, fmt.Errorf("import %s: %w", tarPath, err)
	}
	return s.refresh([]Image{stored})[0], nil
}

// mustRootFS returns the rootfs section (the layers' diff IDs) of img's config.
func mustRootFS(img v1.Image) v1.RootFS {
	cf, err := img.ConfigFile()
	if err != nil || cf == nil {
		return v1.RootFS{Type: "layers"}
	}
	return cf.RootFS
}
