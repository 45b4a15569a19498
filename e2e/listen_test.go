package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestAddressInUse: an address already in use at start, whichever listener
// it is for, exits 1 with one line on stderr that names the address and
// the key or flag that set it, and starts nothing.
func TestAddressInUse(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() }) // after the parallel subtests
	addr := held.Addr().String()
	for _, tc := range []struct{ setting, policy, flag string }{
		{"[metrics] listen", fmt.Sprintf("[metrics]\nlisten = %q\n", addr), ""},
		{"--metrics-addr", "", addr},
		{"[serve] listen", fmt.Sprintf("[serve]\nlisten = %q\nupstream = \"http://127.0.0.1:1\"\n", addr), ""},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			args := []string{"run", "--backend", "sim", "--name", "inuse", "--policy", e.policy(tc.policy)}
			if tc.flag != "" {
				args = append(args, "--metrics-addr", tc.flag)
			}
			code, out, stderr := e.run(append(args, sh("echo started")...))
			want := "gpuguard: cannot listen on " + addr + " (" + tc.setting + "): address already in use\n"
			if code != 1 || stderr != want || strings.Contains(out, "started") {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1, nothing started, and the one line\n%s", code, out, stderr, want)
			}
		})
	}
}
