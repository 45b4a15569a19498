//go:build unix

package serve

import (
	"syscall"
)

// peeker looks at a kept connection without blocking, before a request
// is written on it: without a goroutine reading each idle connection (as
// http.Transport has), a child that closed one while idle (its own idle
// timeout, a restart) is seen here, and the request goes on a new one.
type peeker struct {
	rc  syscall.RawConn // nil: not a socket, assumed alive
	fn  func(fd uintptr) bool
	ok  bool
	buf [1]byte
}

func (c *hopConn) initAlive() {
	sc, ok := c.nc.Conn.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	p := &c.peek
	p.rc = rc
	p.fn = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read is a live idle connection; an end of stream, an
		// error, or bytes nobody asked for make it useless.
		p.ok = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	}
}

// alive reports whether the idle connection c may carry a request.
func (c *hopConn) alive() bool {
	p := &c.peek
	if p.rc == nil {
		return true
	}
	if err := p.rc.Read(p.fn); err != nil {
		return false
	}
	return p.ok
}
