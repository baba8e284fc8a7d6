package image

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// mountFor mounts img's rootfs in a fresh container directory on a tmpfs of its own, as the
// runtime keeps them, with the writable layer in a directory on disk, and unmounts both at
// cleanup.
func mountFor(t *testing.T, s *Store, id string) (containerDir, writableDir, rootfs string) {
	t.Helper()
	tmpfs := t.TempDir()
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(tmpfs, unix.MNT_DETACH) })
	containerDir = filepath.Join(tmpfs, "c")
	writableDir = filepath.Join(t.TempDir(), "w")
	t.Cleanup(func() {
		if err := s.Unmount(containerDir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	rootfs, err := s.Mount(id, containerDir, writableDir)
	if err != nil {
		t.Fatal(err)
	}
	if rootfs != filepath.Join(containerDir, "bundle", "rootfs") {
		t.Errorf("rootfs %s", rootfs)
	}
	return containerDir, writableDir, rootfs
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestMountTwoLayersWithWhiteouts(t *testing.T) {
	needs.Root(t)
	s := openStore(t)
	img := imageOf(t, []string{"sh"},
		layerOf(t,
			entry{name: "a", data: "a"},
			entry{name: "b", data: "b1"},
			entry{name: "dir/", typ: tar.TypeDir},
			entry{name: "dir/x", data: "x"},
			entry{name: "keep/k", data: "k"},
		),
		layerOf(t,
			entry{name: ".wh.a"},
			entry{name: "b", data: "b2"},
			entry{name: "dir/", typ: tar.TypeDir},
			entry{name: "dir/.wh..wh..opq"},
			entry{name: "dir/y", data: "y"},
		))
	loadFile(t, s, testimage.WriteTarball(t, t.TempDir(), "layered:1", img))
	id := configID(t, img)
	containerDir, writableDir, rootfs := mountFor(t, s, id)

	if _, err := os.Lstat(filepath.Join(rootfs, "a")); !os.IsNotExist(err) {
		t.Errorf("a is visible through its whiteout: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "b")); string(b) != "b2" {
		t.Errorf("b = %q, want the upper layer's b2", b)
	}
	if got := dirNames(t, filepath.Join(rootfs, "dir")); !slices.Equal(got, []string{"y"}) {
		t.Errorf("opaque dir holds %v, want [y]", got)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "keep", "k")); string(b) != "k" {
		t.Errorf("keep/k = %q", b)
	}

	// Idempotent, and writes go to the writable directory's upper/, not the container
	// directory's file system.
	again, err := s.Mount(id, containerDir, writableDir)
	if err != nil || again != rootfs {
		t.Fatalf("second Mount: %s %v", again, err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "new"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(writableDir, "upper", "new")); err != nil || string(b) != "n" {
		t.Errorf("upper/new: %q %v", b, err)
	}
	if got := dirNames(t, containerDir); !slices.Equal(got, []string{"bundle"}) {
		t.Errorf("container directory holds %v, want [bundle]", got)
	}

	// Removing the image keeps the layers a mounted rootfs uses, until it is unmounted.
	if err := s.Remove(id); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(s.dir, "layers")); len(got) != 2 {
		t.Errorf("layers of a mounted rootfs were collected: %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "b")); string(b) != "b2" {
		t.Errorf("rootfs broke after Remove: b = %q", b)
	}
	if err := s.Unmount(containerDir); err != nil {
		t.Fatal(err)
	}
	if err := s.Unmount(containerDir); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
	if mounted, _ := isMountPoint(rootfs); mounted {
		t.Error("still mounted after Unmount")
	}
	if err := s.gc(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(s.dir, "layers")); len(got) != 0 {
		t.Errorf("layers left after unmount and gc: %v", got)
	}
}

func TestMountEmptyImage(t *testing.T) {
	needs.Root(t)
	s := openStore(t)
	img := imageOf(t, []string{"true"})
	loadFile(t, s, testimage.WriteTarball(t, t.TempDir(), "empty:1", img))
	_, _, rootfs := mountFor(t, s, "empty:1")
	if got := dirNames(t, rootfs); len(got) != 0 {
		t.Errorf("empty image rootfs holds %v", got)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "f"), nil, 0o644); err != nil {
		t.Errorf("write to the rootfs of an empty image: %v", err)
	}
	if got := dirNames(t, filepath.Join(s.dir, "empty")); len(got) != 0 {
		t.Errorf("the shared empty lower dir was written: %v", got)
	}
}

func TestMountUnknownImage(t *testing.T) {
	s := openStore(t)
	if _, err := s.Mount("nope:1", filepath.Join(t.TempDir(), "c"), filepath.Join(t.TempDir(), "w")); err == nil {
		t.Error("mounted an unknown image")
	}
	if err := s.Unmount(filepath.Join(t.TempDir(), "never")); err != nil {
		t.Errorf("Unmount of nothing: %v", err)
	}
}

func TestMountBusybox(t *testing.T) {
	needs.Root(t)
	s := openStore(t)
	loadFile(t, s, testimage.WriteTarball(t, t.TempDir(), "busybox", testimage.Busybox(t)))
	_, _, rootfs := mountFor(t, s, "busybox")
	if target, err := os.Readlink(filepath.Join(rootfs, "bin", "sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("/tmp: %v %v", fi, err)
	}
}
