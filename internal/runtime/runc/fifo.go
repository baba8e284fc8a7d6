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
// to exec the process: `runc start` is reading it — the init writes one byte and then execs —
// and removing it, which makes runc report the container running. Start does exactly that
// itself instead of running `runc start`, which saves a runc process (~10 ms of CPU) per
// container; anything unexpected (no FIFO, not runc, the init gone) leaves it to `runc start`,
// whose error is then the one reported.
const execFifo = "exec.fifo"

// fifoPoll is how often startByFifo looks again for the init's byte while the init has not
// opened the FIFO yet (it opens it a moment after `runc create` returned).
const fifoPoll = time.Millisecond

// errFifoUnusable says that the exec FIFO cannot start the container: `runc start` must.
var errFifoUnusable = errors.New("exec fifo unusable")

// startByFifo starts the created container id whose init has the given pid, as `runc start`
// does for runc 1.x. It returns errFifoUnusable (wrapped) when it did nothing that `runc start`
// could not still do.
func (r *Runtime) startByFifo(ctx context.Context, id string, pid int) error {
	if filepath.Base(r.binary) != "runc" || !validContainerID(id) {
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
	// Non-blocking: the open returns at once (a blocking one would wait for a writer that may
	// never come), and the file is then read through the poller, which honours ctx.
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
			got = true // the init wrote its byte; it closes the FIFO when it execs
			continue
		}
		if got && (err == nil || errors.Is(err, io.EOF)) {
			break // the writer is gone: the init has exec'd the process, as `runc start` waits for
		}
		if err != nil && !errors.Is(err, io.EOF) {
			// Nothing was read: the init still waits, and `runc start` can start it.
			return fmt.Errorf("%w: %w", errFifoUnusable, errors.Join(err, ctx.Err()))
		}
		// EOF without a byte: the init has not opened the FIFO for writing yet. It will, as
		// this reader holds it open, unless it died.
		if s, ok := procStartTime(pid); !ok || s != start {
			return errFifoUnusable
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errFifoUnusable, ctx.Err())
		case <-time.After(fifoPoll):
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
