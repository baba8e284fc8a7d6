package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/testenv/needs"
)

// mountCleanup unmounts whatever is left below dir when the test ends.
func mountCleanup(t *testing.T, dir string) {
	t.Cleanup(func() {
		for range 4 {
			mps, err := mountPointsUnder(dir)
			if err != nil || len(mps) == 0 {
				return
			}
			for i := len(mps) - 1; i >= 0; i-- {
				_ = unix.Unmount(mps[i], unix.MNT_DETACH)
			}
		}
	})
}

func TestMemoryEmptyDirAndTearDown(t *testing.T) {
	needs.Root(t)
	ctx := context.Background()
	m, _, root := newManager(t)
	mountCleanup(t, root)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := testPod(
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("4Mi"))}}},
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	// Idempotent: no second tmpfs on top.
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "mem")
	var st unix.Statfs_t
	if err := unix.Statfs(mem, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("memory emptyDir is not tmpfs (type %x)", st.Type)
	}
	if size := int64(st.Blocks) * st.Bsize; size != 4<<20 {
		t.Errorf("tmpfs size = %d, want %d", size, 4<<20)
	}
	if mps, _ := mountPointsUnder(filepath.Join(root, "pods")); len(mps) != 1 {
		t.Fatalf("mounts after two Setups: %v", mps)
	}
	if info, err := os.Stat(mem); err != nil || info.Mode().Perm() != 0o777 {
		t.Errorf("tmpfs mode: %v %v", info, err)
	}
	if err := os.WriteFile(filepath.Join(mem, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bind mount of a host directory inside the pod directory (as mount propagation could
	// leave) is unmounted, not emptied.
	bind := filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "disk", "bind")
	if err := os.Mkdir(bind, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(outside, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods/uid-1")); !os.IsNotExist(err) {
		t.Fatalf("pod dir left: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "k" {
		t.Fatalf("bind-mounted host dir emptied: %v", err)
	}
	if mps, _ := mountPointsUnder(root); len(mps) != 0 {
		t.Fatalf("mounts left: %v", mps)
	}
}

func TestTearDownRefusesBusyMount(t *testing.T) {
	needs.Root(t)
	ctx := context.Background()
	m, _, root := newManager(t)
	mountCleanup(t, root)
	pod := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "mem")
	// An open directory on the tmpfs makes it busy: TearDown must fail and delete nothing.
	f, err := os.Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mem, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Keep the cwd-style reference: chdir is process-wide, so hold an fd inside instead.
	g, err := os.Open(filepath.Join(mem, "data"))
	if err != nil {
		t.Fatal(err)
	}
	err = m.TearDown(ctx, pod.UID)
	f.Close()
	g.Close()
	if err == nil || !strings.Contains(err.Error(), "unmount") {
		t.Fatalf("TearDown of a busy tmpfs: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mem, "data")); err != nil {
		t.Fatalf("content removed despite the failed unmount: %v", err)
	}
	if err := m.TearDown(ctx, pod.UID); err != nil {
		t.Fatalf("TearDown once free: %v", err)
	}
}

func TestFSGroupOwnership(t *testing.T) {
	needs.Root(t)
	ctx := context.Background()
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"key": []byte("v")}}
	m, _, root := newManager(t, sec)
	pod := testPod(
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr[int32](0o400)}}},
		v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr[int64](1234)}
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	secDir := filepath.Join(root, "pods/uid-1/volumes", PluginSecret, "sec")
	check := func(path string, wantMode os.FileMode) {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode()&(os.ModePerm|os.ModeSetgid) != wantMode || info.Sys().(*syscall.Stat_t).Gid != 1234 {
			t.Errorf("%s: mode %v gid %d, want %v gid 1234", path, info.Mode(), info.Sys().(*syscall.Stat_t).Gid, wantMode)
		}
	}
	check(filepath.Join(secDir, "key"), 0o440)
	check(filepath.Join(root, "pods/uid-1/volumes", PluginEmptyDir, "cache"), 0o777|os.ModeSetgid)
	before, _ := os.Readlink(filepath.Join(secDir, dataDirName))
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Readlink(filepath.Join(secDir, dataDirName)); after != before {
		t.Errorf("unchanged secret rewritten: %s → %s", before, after)
	}
	if err := m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestSecretVolumesOnTmpfs(t *testing.T) {
	needs.Root(t)
	ctx := context.Background()
	root := t.TempDir()
	mountCleanup(t, root)
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"key": []byte("v1")}}
	cs := fake.NewClientset(sec)
	m := New(Config{RootDir: root, Client: cs})
	pod := testPod(
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}}}},
	)
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	sec.Data["key"] = []byte("v2")
	if _, err := cs.CoreV1().Secrets("ns").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Setup(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{
		filepath.Join(root, "pods/uid-1/volumes", PluginSecret, "sec"),
		filepath.Join(root, "pods/uid-1/volumes", PluginProjected, "proj"),
	} {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.TMPFS_MAGIC {
			t.Errorf("%s is not on tmpfs", dir)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "key")); err != nil || string(b) != "v2" {
			t.Errorf("%s/key = %q %v", dir, b, err)
		}
	}
	if mps, _ := mountPointsUnder(root); len(mps) != 2 {
		t.Errorf("mounts after two Setups: %v", mps)
	}
	if err := m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mountPointsUnder(root); len(mps) != 0 {
		t.Fatalf("mounts left: %v", mps)
	}
}

func TestTearDownAllUnmountsEveryPod(t *testing.T) {
	needs.Root(t)
	ctx := context.Background()
	m, _, root := newManager(t)
	mountCleanup(t, root)
	for _, uid := range []string{"uid-1", "uid-2"} {
		pod := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
		pod.UID = types.UID(uid)
		if err := m.Setup(ctx, pod, nil); err != nil {
			t.Fatal(err)
		}
	}
	if mps, err := mountPointsUnder(root); err != nil || len(mps) != 2 {
		t.Fatalf("mounts before = %q, %v; want two tmpfs mounts", mps, err)
	}
	if err := m.TearDownAll(ctx); err != nil {
		t.Fatal(err)
	}
	if mps, err := mountPointsUnder(root); err != nil || len(mps) != 0 {
		t.Errorf("mounts after = %q, %v; want none", mps, err)
	}
	if entries, err := os.ReadDir(filepath.Join(root, "pods")); err != nil || len(entries) != 0 {
		t.Errorf("pods dir after = %v, %v; want empty", entries, err)
	}
	// Nothing to tear down is not an error.
	if err := New(Config{RootDir: t.TempDir()}).TearDownAll(ctx); err != nil {
		t.Errorf("empty root: %v", err)
	}
}
