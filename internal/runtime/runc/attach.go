package runc

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Annotations of the bundle's config.json that the shim reads: "true" gives the container a
// stdin pipe that attach sessions write to (CRI ContainerConfig.stdin), and with
// AnnotationStdinOnce the pipe closes when the first attach session that sent stdin ends
// (stdin_once).
const (
	AnnotationStdin     = "io.kubette.runc.stdin"
	AnnotationStdinOnce = "io.kubette.runc.stdin-once"
)

// attachSocket is the shim's unix socket in the container directory.
const attachSocket = "attach.sock"

// The attach protocol on attachSocket. The client sends one byte of flags (attachWantsStdin,
// attachFramed) and then, if it asked for stdin, the bytes for the container's stdin; closing
// its write side ends its stdin. With attachFramed (a client with terminal sizes to send) what
// follows the flags are frames instead — a kind byte (inputStdin or inputResize), a
// big-endian uint32 length and that many bytes; a resize is the width and the height as
// big-endian uint16s — and the end of the write side ends stdin all the same. The shim sends
// frames of the container's output, each a stream byte
// (streamStdout or streamStderr), a big-endian uint32 length and that many bytes, and closes
// the connection once the container has exited and its output is drained.
const (
	attachWantsStdin = 1 << 0
	attachFramed     = 1 << 1

	inputStdin  = 1
	inputResize = 2

	// maxInputFrame bounds a client's frame (stdin chunks are at most 32 KiB).
	maxInputFrame = 1 << 20

	streamStdout = 1
	streamStderr = 2

	// attachQueue is how many output chunks a client may lag behind before the shim drops
	// it: a slow client never holds up the container's output or its log.
	attachQueue = 1024
)

// ErrAttachUnsupported is returned (wrapped) by Attach for a container whose shim serves no
// attach socket (started by an older kubette).
var ErrAttachUnsupported = errors.New("the container's shim does not serve attach")

// unixPathIn is a path naming file name in the directory open as dirFd, short enough for a
// unix socket address whatever the directory's own path (sockaddr_un holds 108 bytes).
func unixPathIn(dir *os.File, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name)
}

// listenAttach listens on dir/attach.sock (replacing a stale one).
func listenAttach(dir string) (*unixListener, error) {
	_ = os.Remove(filepath.Join(dir, attachSocket))
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("attach socket: %w", err)
	}
	defer d.Close()
	// The socket file is removed by the shim when it is done (the /proc/self/fd path no
	// longer names the directory then).
	ln, err := listenUnix(unixPathIn(d, attachSocket))
	if err != nil {
		return nil, fmt.Errorf("attach socket: %w", err)
	}
	return ln, nil
}

// dialAttach connects to dir/attach.sock.
func dialAttach(ctx context.Context, dir string) (*unixConn, error) {
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return dialUnix(ctx, unixPathIn(d, attachSocket))
}

// ioConfig is what the shim reads of a bundle's config.json: the stdin annotations and
// whether the process has a terminal.
type ioConfig struct {
	stdin, stdinOnce, terminal bool
}

// readIOConfig reads the ioConfig of a bundle.
func readIOConfig(bundle string) (ioConfig, error) {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return ioConfig{}, fmt.Errorf("read config.json: %w", err)
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
		Process     *struct {
			Terminal bool `json:"terminal"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return ioConfig{}, fmt.Errorf("config.json: %w", err)
	}
	return ioConfig{
		stdin:     spec.Annotations[AnnotationStdin] == "true",
		stdinOnce: spec.Annotations[AnnotationStdinOnce] == "true",
		terminal:  spec.Process != nil && spec.Process.Terminal,
	}, nil
}

// attachHub is the shim's side of attach: it copies the container's output to every attached
// client and the clients' stdin to the container's stdin pipe.
type attachHub struct {
	mu      sync.Mutex
	clients map[*attachClient]struct{}
	closed  bool
	stdin   io.WriteCloser // nil: the container has no stdin, or it is closed
	once    bool           // stdin_once: close stdin when the first stdin session ends
	resize  func(TermSize) // nil: no terminal
	writers sync.WaitGroup
}

type attachClient struct {
	conn *unixConn
	out  chan []byte // frames
}

// newAttachHub makes the hub of a container whose stdin is stdin (nil: none) and whose
// terminal, if it has one, resize sizes (nil: no terminal).
func newAttachHub(stdin io.WriteCloser, once bool, resize func(TermSize)) *attachHub {
	return &attachHub{clients: map[*attachClient]struct{}{}, stdin: stdin, once: once, resize: resize}
}

// writer returns the io.Writer that sends what is written to it as stream to the clients.
func (h *attachHub) writer(stream byte) io.Writer { return hubWriter{h, stream} }

type hubWriter struct {
	h      *attachHub
	stream byte
}

// Write never fails: the container's output must reach the log whatever the clients do.
func (w hubWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if len(w.h.clients) == 0 {
		return len(p), nil
	}
	frame := make([]byte, 5+len(p))
	frame[0] = w.stream
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(p)))
	copy(frame[5:], p)
	for c := range w.h.clients {
		select {
		case c.out <- frame:
		default:
			// Too far behind: drop it rather than hold up the container.
			delete(w.h.clients, c)
			close(c.out)
		}
	}
	return len(p), nil
}

// serve accepts clients until ln is closed.
func (h *attachHub) serve(ln *unixListener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go h.handle(conn)
	}
}

// handle runs one client: a writer of frames, and the reader of its stdin.
func (h *attachHub) handle(conn *unixConn) {
	c := &attachClient{conn: conn, out: make(chan []byte, attachQueue)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		conn.Close()
		return
	}
	h.clients[c] = struct{}{}
	h.writers.Add(1)
	h.mu.Unlock()

	go func() {
		defer h.writers.Done()
		defer conn.Close()
		bw := bufio.NewWriter(conn)
		for frame := range c.out {
			if _, err := bw.Write(frame); err != nil {
				h.drop(c)
				break
			}
			if len(c.out) == 0 {
				if err := bw.Flush(); err != nil {
					h.drop(c)
					break
				}
			}
		}
		_ = bw.Flush()
		for range c.out { // a dropped client's queue is closed: drain it
		}
	}()

	var flags [1]byte
	if _, err := io.ReadFull(conn, flags[:]); err != nil {
		h.drop(c)
		return
	}
	wantsStdin := flags[0]&attachWantsStdin != 0
	switch {
	case flags[0]&attachFramed != 0:
		if err := h.readFrames(conn, wantsStdin); err != nil {
			h.drop(c)
			return
		}
		if !wantsStdin {
			h.drop(c) // without stdin, the end of the write side is the client's end
			return
		}
	case !wantsStdin:
		// Nothing to read but the end of the connection.
		_, _ = io.Copy(io.Discard, conn)
		h.drop(c)
		return
	default:
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				h.writeStdin(buf[:n])
			}
			if err != nil {
				break
			}
		}
	}
	h.mu.Lock()
	if h.once && h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
	}
	h.mu.Unlock()
	// The client closed its side for stdin only: it keeps reading output until the shim
	// closes the connection (or it goes away, which the writer notices).
}

// readFrames reads a framed client's input until the end of its write side (nil) or a
// malformed frame (an error): stdin (written when the client asked for it) and terminal sizes.
func (h *attachHub) readFrames(conn *unixConn, wantsStdin bool) error {
	br := bufio.NewReaderSize(conn, 32<<10)
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > maxInputFrame {
			return fmt.Errorf("attach input frame of %d bytes", n)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return err
		}
		switch hdr[0] {
		case inputStdin:
			if wantsStdin {
				h.writeStdin(p)
			}
		case inputResize:
			if len(p) == 4 && h.resize != nil {
				h.resize(TermSize{Width: binary.BigEndian.Uint16(p[0:2]), Height: binary.BigEndian.Uint16(p[2:4])})
			}
		}
	}
}

// writeStdin writes to the container's stdin, if it has one still open.
func (h *attachHub) writeStdin(p []byte) {
	h.mu.Lock()
	in := h.stdin
	h.mu.Unlock()
	if in == nil {
		return
	}
	// Outside the lock: a container that does not read blocks this client, not the output.
	_, _ = in.Write(p)
}

// drop removes a client; its writer closes the connection.
func (h *attachHub) drop(c *attachClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.out)
	}
}

// attachFlushLimit bounds how long close waits for the clients to be sent their output.
const attachFlushLimit = 5 * time.Second

// close ends every client once it has been sent the output so far (waiting at most
// attachFlushLimit: the shim exits next, which would cut the last output off), and closes the
// container's stdin.
func (h *attachHub) close() {
	h.closeClients()
	flushed := make(chan struct{})
	go func() {
		h.writers.Wait()
		close(flushed)
	}()
	select {
	case <-flushed:
	case <-time.After(attachFlushLimit):
	}
}

func (h *attachHub) closeClients() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		delete(h.clients, c)
		close(c.out)
	}
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
	}
}

// AttachOptions are the streams of Attach. A nil Stdout or Stderr drops that output; a nil
// Stdin sends none. Resize, for a container with a terminal, carries the client's terminal
// sizes, which the shim sets on the container's terminal.
type AttachOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Resize         <-chan TermSize
}

// Attach connects to a running container's stdio through its shim: the container's output
// from now on goes to Stdout and Stderr, and Stdin to the container's stdin when it has one
// (CRI stdin). It returns once the container has exited (nil), when ctx ends, or when the
// output cannot be written.
func (r *Runtime) Attach(ctx context.Context, id string, o AttachOptions) error {
	bundle, err := r.bundleOf(ctx, id)
	if err != nil {
		return fmt.Errorf("attach to container %s: %w", id, err)
	}
	conn, err := dialAttach(ctx, filepath.Dir(bundle))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ECONNREFUSED) {
			return fmt.Errorf("attach to container %s: %w", id, ErrAttachUnsupported)
		}
		return fmt.Errorf("attach to container %s: %w", id, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var flags byte
	if o.Stdin != nil {
		flags |= attachWantsStdin
	}
	if o.Resize != nil {
		flags |= attachFramed
	}
	if _, err := conn.Write([]byte{flags}); err != nil {
		return fmt.Errorf("attach to container %s: %w", id, err)
	}
	switch {
	case o.Resize != nil:
		done := make(chan struct{})
		defer close(done)
		fw := &frameWriter{w: conn}
		go forEachResize(done, o.Resize, func(sz TermSize) error {
			var p [4]byte
			binary.BigEndian.PutUint16(p[0:2], sz.Width)
			binary.BigEndian.PutUint16(p[2:4], sz.Height)
			return fw.write(inputResize, p[:])
		})
		if o.Stdin != nil {
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := o.Stdin.Read(buf)
					if n > 0 && fw.write(inputStdin, buf[:n]) != nil {
						return
					}
					if err != nil {
						break
					}
				}
				_ = conn.CloseWrite()
			}()
		}
	case o.Stdin != nil:
		go func() {
			_, _ = io.Copy(conn, o.Stdin)
			_ = conn.CloseWrite()
		}()
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	var hdr [5]byte
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("attach to container %s: %w", id, err)
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		var w io.Writer
		switch hdr[0] {
		case streamStdout:
			w = o.Stdout
		case streamStderr:
			w = o.Stderr
		}
		for n > 0 {
			m, err := io.ReadFull(br, buf[:min(n, len(buf))])
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("attach to container %s: %w", id, err)
			}
			n -= m
			if w != nil {
				if _, err := w.Write(buf[:m]); err != nil {
					return fmt.Errorf("attach to container %s: write output: %w", id, err)
				}
			}
		}
	}
}

// frameWriter writes an attach client's input frames; stdin and resizes come from two
// goroutines.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) write(kind byte, p []byte) error {
	frame := make([]byte, 5+len(p))
	frame[0] = kind
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(p)))
	copy(frame[5:], p)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.w.Write(frame)
	return err
}

// forEachResize hands each terminal size from sizes to apply, until sizes is closed, done
// is closed or apply fails: the resize loop of exec and attach sessions.
func forEachResize(done <-chan struct{}, sizes <-chan TermSize, apply func(TermSize) error) {
	for {
		select {
		case <-done:
			return
		case sz, ok := <-sizes:
			if !ok || apply(sz) != nil {
				return
			}
		}
	}
}
