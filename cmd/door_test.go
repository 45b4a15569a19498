package cmd

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestDoorFlags: flags become options, with the contract's defaults; bad
// values are usage errors (64).
func TestDoorFlags(t *testing.T) {
	var got *DoorOptions
	run := func(args ...string) error {
		got = nil
		c := NewCmdDoor(&IO{}, func(o *DoorOptions) error { got = o; return nil })
		c.SetArgs(args)
		c.SilenceErrors, c.SilenceUsage = true, true
		return c.Execute()
	}
	if err := run(); err != nil || got.Listen != "127.0.0.1:8080" || got.MaxBody != 32<<20 || got.MetricsAddr != "" || got.RuntimeDir != "" {
		t.Fatalf("defaults: %+v %v", got, err)
	}
	if err := run("--listen", "0.0.0.0:9000", "--runtime-dir", "/r", "--metrics-addr", ":9465", "--max-body", "1.5GB"); err != nil ||
		got.Listen != "0.0.0.0:9000" || got.RuntimeDir != "/r" || got.MetricsAddr != ":9465" || got.MaxBody != 1_500_000_000 {
		t.Fatalf("set: %+v %v", got, err)
	}
	for _, args := range [][]string{
		{"--listen", "8080"}, {"--metrics-addr", "nope"}, {"--max-body", "lots"}, {"--max-body", "0"}, {"extra"},
	} {
		err := run(args...)
		var ee *ExitError
		if !asExit(err, &ee) || ee.Code != ExitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestDoorAddressInUse: an address in use exits 1 with one line naming
// the flag and the address.
func TestDoorAddressInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stderr bytes.Buffer
	code := Execute(&IO{Out: &bytes.Buffer{}, ErrOut: &stderr, Getenv: func(string) string { return "" }},
		[]string{"door", "--listen", busy.Addr().String(), "--runtime-dir", t.TempDir()})
	want := "gpuguard: cannot listen on " + busy.Addr().String() + " (--listen): address already in use\n"
	if code != ExitFailure || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), want)
	}
	if strings.Count(stderr.String(), "\n") != 1 {
		t.Error("more than one line")
	}
}
