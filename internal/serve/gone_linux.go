//go:build linux

package serve

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watcher is how the gate watches the client of a request held with its
// body unread: the request's own goroutine waits on the connection. A
// connection with no file descriptor to poll has none: its held request
// waits out its hold as elsewhere (gone_other.go).
func (c *clientConn) watcher() watcher {
	if _, ok := c.Conn.(syscall.Conn); !ok {
		return nil
	}
	return c
}

// wait blocks in the caller's goroutine until the client has shut its
// side of the connection (POLLRDHUP: its FIN arrived, even behind body
// bytes not read yet) or the connection failed (true), or until passes,
// or wake was called with stop set (false). It reads nothing.
func (c *clientConn) wait(until time.Time, stop *atomic.Bool) (gone bool) {
	rc, err := c.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return true // no socket left to wait on
	}
	_ = c.Conn.SetReadDeadline(until)
	defer c.Conn.SetReadDeadline(time.Time{})
	fds := []unix.PollFd{{Events: unix.POLLRDHUP}}
	// Read calls the function at once and again at each readiness of the
	// socket (new bytes, the FIN), until it answers true; the deadline
	// (until, or wake's) ends the wait with an error.
	err = rc.Read(func(fd uintptr) bool {
		if stop.Load() {
			return true
		}
		fds[0].Fd, fds[0].Revents = int32(fd), 0
		n, err := unix.Poll(fds, 0)
		gone = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		return gone
	})
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		gone = true // the connection itself failed
	}
	return gone
}

// wake ends a wait: a deadline already past. A wake that comes after the
// wait has ended leaves that deadline behind, which does no harm: every
// read of the body sets its own first (timedBody).
func (c *clientConn) wake() { _ = c.Conn.SetReadDeadline(time.Unix(1, 0)) }
