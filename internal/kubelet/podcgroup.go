package kubelet

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// cgroupRoot is where the cgroup v1 hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// podCgroupParent is the cgroup the kubelet asks the runtime to put a pod's sandbox and
// containers in (the sandbox config's CgroupParent).
func podCgroupParent(uid types.UID) string { return "/kubette/pod" + string(uid) }

// removePodCgroup removes a pod's cgroup from every cgroup hierarchy below root once the
// runtime has removed the pod's sandboxes, as upstream's kubelet removes the pod cgroups it
// made. The runtime creates the cgroup (runc makes the parents of a container's cgroup) but
// need not remove it: kubette's own runtime does, containerd leaves it. A cgroup that still
// has processes or child cgroups is refused by the kernel and stays; the removal is best
// effort and reports nothing.
func removePodCgroup(root string, uid types.UID) {
	if uid == "" || filepath.Base(string(uid)) != string(uid) {
		return
	}
	hierarchies, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, h := range hierarchies {
		// EBUSY/ENOTEMPTY (still in use) and ENOENT (never made there) leave nothing to do.
		_ = unix.Rmdir(filepath.Join(root, h.Name(), podCgroupParent(uid)))
	}
}
