package image

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entry is one tar entry of a test layer.
type entry struct {
	name     string
	typ      byte // tar.TypeReg when 0
	mode     int64
	data     string
	link     string
	uid, gid int
	xattrs   map[string]string
}

var testTime = time.Date(2020, 2, 3, 4, 5, 6, 0, time.UTC)

// tarOf builds an uncompressed tar of entries.
func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Uid: e.uid, Gid: e.gid,
			ModTime: testTime, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		for k, v := range e.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar %s: %v", e.name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layerOf wraps a tar of entries as a (gzip-compressed) layer.
func layerOf(t testing.TB, entries ...entry) v1.Layer {
	t.Helper()
	b := tarOf(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf builds a linux image of layers with command cmd.
func imageOf(t testing.TB, cmd []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	cf, err := empty.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Cmd = cmd
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// openStore opens a store in a fresh directory and checks its invariants at cleanup.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkInvariants(t, s) })
	return s
}

// checkInvariants: every record's blobs and layers exist, and tmp/ holds nothing.
func checkInvariants(t *testing.T, s *Store) {
	t.Helper()
	recs, err := s.index()
	if err != nil {
		t.Errorf("invariants: %v", err)
		return
	}
	for _, r := range recs {
		for _, b := range r.Blobs {
			if _, err := os.Stat(s.blobPath(b)); err != nil {
				t.Errorf("invariants: image %s: blob %v", r.ID, err)
			}
		}
		for _, l := range r.Layers {
			if _, err := os.Stat(s.layerPath(l)); err != nil {
				t.Errorf("invariants: image %s: layer %v", r.ID, err)
			}
		}
	}
	if left, _ := os.ReadDir(s.tmpDir()); len(left) > 0 {
		t.Errorf("invariants: tmp/ holds %d entries, first %s", len(left), left[0].Name())
	}
}

// basic is a static basic-auth authenticator.
func basic(user, pass string) authn.Authenticator {
	return &authn.Basic{Username: user, Password: pass}
}
