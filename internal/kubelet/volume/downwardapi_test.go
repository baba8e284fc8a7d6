package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podinfo is the downwardAPI volume of upstream's downward API volume tests: the pod's name and
// the container's cpu and memory requests and limits.
func podinfo() []v1.DownwardAPIVolumeFile {
	ref := func(path, res string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: res}}
	}
	return []v1.DownwardAPIVolumeFile{
		{Path: "podname", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
		ref("cpu_limit", "limits.cpu"), ref("cpu_request", "requests.cpu"),
		ref("memory_limit", "limits.memory"), ref("memory_request", "requests.memory"),
	}
}

func TestDownwardAPILimitsDefaultToAllocatable(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
	for _, projected := range []bool{false, true} {
		m, _, root := newManager(t)
		vol := v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: podinfo()}}}
		plugin := PluginDownwardAPI
		if projected {
			plugin = PluginProjected
			vol.VolumeSource = v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{DownwardAPI: &v1.DownwardAPIProjection{Items: podinfo()}}}}}
		}
		if err := m.Setup(context.Background(), testPod(vol), alloc); err != nil {
			t.Fatalf("projected=%v: %v", projected, err)
		}
		got := visible(t, root, plugin, "podinfo")
		want := map[string]string{"podname": "p", "cpu_limit": "2", "cpu_request": "0", "memory_limit": "4294967296", "memory_request": "0"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("projected=%v: %s = %q, want %q", projected, k, got[k], v)
			}
		}
	}
}

func TestDownwardAPIModes(t *testing.T) {
	m, _, root := newManager(t)
	items := podinfo()[:1]
	items = append(items, v1.DownwardAPIVolumeFile{Path: "ns", Mode: ptr(int32(0o400)),
		FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}})
	pod := testPod(
		v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items, DefaultMode: ptr(int32(0o440))}}},
		v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr(int32(0o400)),
			Sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{Items: items}}}}}},
	)
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plugin, vol, file string
		want              os.FileMode
	}{
		{PluginDownwardAPI, "d", "podname", 0o440}, // defaultMode
		{PluginDownwardAPI, "d", "ns", 0o400},      // the item's mode wins
		{PluginProjected, "p", "podname", 0o400},
		{PluginProjected, "p", "ns", 0o400},
	} {
		fi, err := os.Stat(filepath.Join(root, "pods", "uid-1", "volumes", tc.plugin, tc.vol, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tc.want {
			t.Errorf("%s/%s mode %v, want %v", tc.vol, tc.file, fi.Mode().Perm(), tc.want)
		}
	}
}

// TestDownwardAPIUpdates: a later Setup of the pod with changed labels and annotations swaps
// the ..data link to a new timestamped directory holding the new content.
func TestDownwardAPIUpdates(t *testing.T) {
	m, _, root := newManager(t)
	items := []v1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "annotations", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		{Path: "builder", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['builder']"}},
	}
	pod := testPod(v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}})
	pod.Labels = map[string]string{"key1": "value1", "key2": "value2"}
	pod.Annotations = map[string]string{"builder": "bar"}
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "pods", "uid-1", "volumes", PluginDownwardAPI, "d")
	before, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if got := visible(t, root, PluginDownwardAPI, "d"); got["labels"] != "key1=\"value1\"\nkey2=\"value2\"" || got["builder"] != "bar" {
		t.Fatalf("first content %q", got)
	}
	// Unchanged: nothing is rewritten.
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	if same, _ := os.Readlink(filepath.Join(dir, "..data")); same != before {
		t.Errorf("an unchanged pod rewrote the volume: ..data %s -> %s", before, same)
	}
	pod = pod.DeepCopy()
	pod.Labels["key3"] = "value3"
	pod.Annotations["builder"] = "foo"
	if err := m.Setup(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	after, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || after == before {
		t.Fatalf("..data %s -> %s (%v), want a new directory", before, after, err)
	}
	got := visible(t, root, PluginDownwardAPI, "d")
	if got["labels"] != "key1=\"value1\"\nkey2=\"value2\"\nkey3=\"value3\"" || got["annotations"] != "builder=\"foo\"" || got["builder"] != "foo" {
		t.Errorf("updated content %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, before)); !os.IsNotExist(err) {
		t.Errorf("old data dir %s still there (%v)", before, err)
	}
	if link, err := os.Readlink(filepath.Join(dir, "labels")); err != nil || link != filepath.Join("..data", "labels") {
		t.Errorf("labels is %q (%v), want a link through ..data", link, err)
	}
}
