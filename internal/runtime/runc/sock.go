package runc

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The shim's unix sockets (attach.sock, runc's console socket) are made with system calls
// and the runtime's poller through os.File rather than with package net: net links cgo's
// resolver whenever cgo is on, and so makes kubette-shim a dynamically linked program, whose
// start — the dynamic loader, and glibc asking the CPU for its caches through dozens of
// CPUID instructions, each a trap to the hypervisor on a virtual machine — cost 1.3 ms of CPU
// more per container start here (3.0 against 1.8 ms for `kubette-shim -protocol`).

// unixListener is a listening unix stream socket.
type unixListener struct{ f *os.File }

// listenUnix listens on the unix socket path (which must not exist).
func listenUnix(path string) (*unixListener, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: socket: %w", path, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen on %s: bind: %w", path, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &unixListener{f: os.NewFile(uintptr(fd), path)}, nil
}

// Accept waits for a connection; it fails once the listener is closed.
func (l *unixListener) Accept() (*unixConn, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if aerr != unix.EINTR && aerr != unix.ECONNABORTED {
				return aerr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if aerr != nil {
		return nil, fmt.Errorf("accept: %w", aerr)
	}
	return &unixConn{f: os.NewFile(uintptr(nfd), l.f.Name())}, nil
}

// Close stops listening (a pending Accept returns an error); the socket file stays.
func (l *unixListener) Close() error { return l.f.Close() }

// unixConn is a connected unix stream socket. Close may be called while Read or Write wait
// in other goroutines: they return.
type unixConn struct{ f *os.File }

// dialUnix connects to the unix socket path.
func dialUnix(ctx context.Context, path string) (*unixConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dial %s: socket: %w", path, err)
	}
	// A blocking connect: to a unix socket it waits only while the listener's backlog is full.
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return &unixConn{f: os.NewFile(uintptr(fd), path)}, nil
}

func (c *unixConn) Read(b []byte) (int, error)  { return c.f.Read(b) }
func (c *unixConn) Write(b []byte) (int, error) { return c.f.Write(b) }

// Close closes the connection.
func (c *unixConn) Close() error { return c.f.Close() }

// CloseWrite shuts the sending side down: the peer reads the end of the stream.
func (c *unixConn) CloseWrite() error {
	rc, err := c.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_WR) }); err != nil {
		return err
	}
	return serr
}

// readMsg reads one message with its ancillary data (SCM_RIGHTS) into b and oob.
func (c *unixConn) readMsg(b, oob []byte) (n, oobn int, err error) {
	rc, err := c.f.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return 0, 0, err
	}
	if rerr != nil {
		return 0, 0, rerr
	}
	if n == 0 && oobn == 0 {
		return 0, 0, errors.New("connection closed")
	}
	return n, oobn, nil
}
