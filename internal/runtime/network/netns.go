package network

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// createNetNS makes a new network namespace with its loopback up and bind-mounts it at path,
// which must not exist yet.
//
// The namespace is entered with unshare(CLONE_NEWNET) on a goroutine that locks its OS thread and
// never unlocks it: when the goroutine returns, the Go runtime ends that thread instead of handing it
// back to the scheduler, so no other goroutine can ever run inside the new namespace by accident.
func createNetNS(path string) (err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create netns file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create netns file %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, removeNetNS(path))
		}
	}()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked, see above
		errc <- enterNewNetNS(path)
	}()
	return <-errc
}

// enterNewNetNS runs on a locked thread: it moves the thread into a new network namespace, sets lo
// up there and bind-mounts the namespace at path.
func enterNewNetNS(path string) error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare network namespace: %w", err)
	}
	h, err := netlink.NewHandle() // sockets opened now belong to the thread's new namespace
	if err != nil {
		return fmt.Errorf("netlink in new netns: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo in new netns: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up in new netns: %w", err)
	}
	self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
	if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount netns at %s: %w", path, err)
	}
	return nil
}

// removeNetNS unmounts and removes a namespace file made by createNetNS. A missing file or one
// that is not mounted is fine, so the call is idempotent.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}
