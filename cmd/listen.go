package cmd

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// listenFailed is the exit for an address that could not be bound at
// start, in one line that names the address and the key or flag that set
// it (setting: "[metrics] listen", "--metrics-addr", "[serve] listen",
// "--listen"), and nothing else: err's own text repeats the address.
//
//	cannot listen on 127.0.0.1:9464 ([metrics] listen): address already in use
//
// An address in use exits 1, whatever the listener (another process holds
// it; the policy is not wrong); any other failure (an address not on this
// host, a port below 1024 without the right) exits code.
func listenFailed(err error, addr, setting string, code int) error {
	why := err
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		why = op.Err // "bind: permission denied", without the address again
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		why, code = syscall.EADDRINUSE, ExitFailure
	}
	return &ExitError{Code: code, Err: fmt.Errorf("cannot listen on %s (%s): %w", addr, setting, why)}
}
