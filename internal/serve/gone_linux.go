//go:build linux

package serve

import (
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchGone watches the client's side of the connection while its
// request waits at the gate with its body unread: net/http notices a
// client that leaves only when it reads from the connection, and nothing
// reads a held request's body. gone is closed once the client has shut
// its side (POLLRDHUP: its FIN arrived, even behind body bytes not read
// yet) or the connection failed. stop ends the watch and waits for it;
// the request's body may be read after it.
func (c *clientConn) watchGone() (gone <-chan struct{}, stop func()) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, func() {}
	}
	ch, done := make(chan struct{}), make(chan struct{})
	var stopped atomic.Bool
	go func() {
		defer close(done)
		fds := []unix.PollFd{{Events: unix.POLLRDHUP}}
		// Read calls the function at once and again at each readiness
		// of the socket (new bytes or the FIN), until it answers true; a
		// deadline in the past (stop) ends the wait.
		err := rc.Read(func(fd uintptr) bool {
			if stopped.Load() {
				return true
			}
			fds[0].Fd, fds[0].Revents = int32(fd), 0
			n, err := unix.Poll(fds, 0)
			return err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		})
		if err == nil && !stopped.Load() {
			close(ch)
		}
	}()
	return ch, func() {
		stopped.Store(true)
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0)) // already past: the wait ends at once
		<-done
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}
