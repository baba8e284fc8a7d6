package runc

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// runcSeals are the seals runc's init looks for on its own binary (runc 1.1's
// RUNC_MEMFD_SEALS): with them it trusts the binary as a copy the container cannot change.
const runcSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// Every runc process that starts a container's or an exec's init (runc create, runc exec)
// re-executes itself as `runc init`, and that init, so that the container cannot overwrite
// the host's runc through /proc/self/exe (CVE-2019-5736), first makes itself a protected copy
// of its binary — in runc 1.1 a temporary file in runc's root with /proc/self/exe
// bind-mounted on it read-only (two mounts, an unmount, an unlink), or else a sealed memfd
// copy — and executes itself once more from it: one more start of the whole glibc program,
// its dynamic loader and CPUID probes included (~2 ms of CPU on this project's virtual
// machines). It does neither when the binary it runs from already is a memfd with runcSeals:
// the Runtime makes that copy once (sealedCopy) and runs runc from it, through
// /proc/<pid>/fd/<n> of its own process, which holds the copy open for as long as the
// Runtime lives (the shims run runc only in Create, while it does). The copy costs the
// binary's size in memory (8.7 MB for Debian 12's runc), once.

// sealedCopy copies the binary at src into a memfd sealed with runcSeals.
func sealedCopy(src string) (*os.File, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("sealed copy of %s: %w", src, err)
	}
	defer in.Close()
	fd, err := unix.MemfdCreate("runc", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 6.3 know no MFD_EXEC: their memfds are executable anyway.
		fd, err = unix.MemfdCreate("runc", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("sealed copy of %s: memfd_create: %w", src, err)
	}
	f := os.NewFile(uintptr(fd), "memfd:runc")
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealed copy of %s: %w", src, err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, runcSeals); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealed copy of %s: seal: %w", src, err)
	}
	if seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals != runcSeals {
		f.Close()
		return nil, fmt.Errorf("sealed copy of %s: seals %#x, %v; want %#x", src, seals, err, runcSeals)
	}
	return f, nil
}

// fdPath is the path through which any process of the machine (the shims too) executes the
// open file f of this process.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd()) }
