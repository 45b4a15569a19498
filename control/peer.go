package control

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerUID is the uid of the process at the other end of c (SO_PEERCRED,
// recorded by the kernel at connect time, so the peer cannot forge it).
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("reading peer credentials: %w", cerr)
	}
	return cred.Uid, nil
}

// sameUserOrRoot is the default peer rule: the socket's mode already keeps
// other users out; this also holds when the dir or socket mode was widened
// by hand.
func sameUserOrRoot(owner int) func(uid uint32) bool {
	return func(uid uint32) bool { return uid == 0 || int64(uid) == int64(owner) }
}
