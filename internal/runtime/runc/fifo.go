package runc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// execFifo is the FIFO runc (1.x) keeps in <root>/<id> while a created container's init waits
// to exec the process. `runc start` reads it until EOF — the init writes one byte, and its
// writing end closes when the init closes its descriptors just before the execve — and then
// removes it, which is what makes runc report the container running. startByFifo does the same
// in this process, which saves a runc process per container (~9 ms of CPU); Start then waits
// for the execve itself (awaitExec), without which a signal sent right after the start could
// still reach runc's init instead of the container's process.
const execFifo = "exec.fifo"

// fifoPoll is how often startByFifo looks again for the init's byte while the init has not
// opened the FIFO for writing yet.
const fifoPoll = time.Millisecond

// errFifoUnusable says that the exec FIFO cannot start the container and that nothing was done
// that `runc start` could not still do: it must start the container, and its error is the one
// reported.
var errFifoUnusable = errors.New("exec fifo unusable")

// startByFifo starts the created container id whose init has the given pid, as `runc start`
// of runc 1.x does. It returns errFifoUnusable (wrapped) when the binary is not runc, there is
// no FIFO, the init is gone before writing its byte, or ctx ended before it did.
func (r *Runtime) startByFifo(ctx context.Context, id string, pid int) error {
	if !r.isRunc || !validContainerID(id) {
		return errFifoUnusable
	}
	start, alive := procStartTime(pid)
	if !alive {
		return errFifoUnusable
	}
	path := filepath.Join(r.root, id, execFifo)
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return errFifoUnusable
	}
	// Non-blocking: the open returns at once (a blocking one waits for a writer that may never
	// come), and the reads then go through the poller, which the deadline set on ctx's end
	// interrupts.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", errFifoUnusable, err)
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 16)
	got := false
	for {
		n, err := f.Read(buf)
		if n > 0 {
			got = true // the init wrote its byte; read on until it closes its end
			continue
		}
		if got {
			// EOF: the writer is closed, the init is about to exec, as `runc start` waits for.
			// Any other error is ctx's end: the init goes on to exec regardless once its byte
			// is read, so the container is started and the FIFO must go all the same.
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %w", errFifoUnusable, errors.Join(err, ctx.Err()))
		}
		// EOF without a byte: the init has not opened the FIFO for writing yet. It will, as a
		// reader now holds it open, unless it died.
		if s, ok := procStartTime(pid); !ok || s != start {
			return errFifoUnusable
		}
		t := time.NewTimer(fifoPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", errFifoUnusable, ctx.Err())
		case <-t.C:
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
