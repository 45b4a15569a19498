package cmd

import (
	"fmt"
	"net"
	"testing"
)

// TestListenFailed: an address in use is exit 1 and one line naming the
// address once and the setting; another bind failure keeps the caller's
// code and says why, without the address twice.
func TestListenFailed(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	_, err = net.Listen("tcp", addr)
	if err == nil {
		t.Fatal("a second listen on the same address succeeded")
	}
	got := listenFailed(fmt.Errorf("metrics: listening on %s: %w", addr, err), addr, "[metrics] listen", ExitConfig)
	want := "cannot listen on " + addr + " ([metrics] listen): address already in use"
	if exitCode(got) != ExitFailure || got.Error() != want {
		t.Errorf("in use: exit %d %q, want 1 %q", exitCode(got), got, want)
	}

	// TEST-NET-1 is on no host: not in use, another failure.
	_, err = net.Listen("tcp", "192.0.2.1:9")
	if err == nil {
		t.Skip("192.0.2.1 is an address of this host")
	}
	got = listenFailed(err, "192.0.2.1:9", "--metrics-addr", ExitConfig)
	want = "cannot listen on 192.0.2.1:9 (--metrics-addr): bind: cannot assign requested address"
	if exitCode(got) != ExitConfig || got.Error() != want {
		t.Errorf("not on this host: exit %d %q, want %d %q", exitCode(got), got, ExitConfig, want)
	}
}
