package proc

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// statusOf is a /proc/<pid>/status text with the given masks, shaped like
// the kernel's (other Sig* lines around them, tab after the colon).
func statusOf(ign, cgt string) string {
	return "Name:\tpython3\nState:\tS (sleeping)\nSigQ:\t0/96365\nSigPnd:\t0000000000000000\n" +
		"ShdPnd:\t0000000000000000\nSigBlk:\t0000000000000200\nSigIgn:\t" + ign + "\nSigCgt:\t" + cgt +
		"\nCapInh:\t0000000000000000\n"
}

func TestParseSignalMasks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  string
		want    SignalMasks
		wantErr string
	}{
		{"default dispositions", statusOf("0000000000000000", "0000000000000000"), SignalMasks{}, ""},
		// Python after signal.signal(SIGUSR1, h): SIGINT (2), SIGUSR1 (10)
		// caught; SIGPIPE (13), SIGXFSZ (25) ignored.
		{"python with a handler", statusOf("0000000001001000", "0000000000000202"), SignalMasks{Ignored: 0x1001000, Caught: 0x202}, ""},
		{"real-time signals", statusOf("0000000000000000", "fffffffe7ffbfeff"), SignalMasks{Caught: 0xfffffffe7ffbfeff}, ""},
		{"no SigCgt", "SigIgn:\t0000000000000000\n", SignalMasks{}, "no SigIgn and SigCgt"},
		{"empty", "", SignalMasks{}, "no SigIgn and SigCgt"},
		{"not hex", statusOf("0000000000000000", "zz"), SignalMasks{}, `SigCgt: "zz" is not a hex`},
		{"too long", statusOf("0000000000000000", "10000000000000000"), SignalMasks{}, "SigCgt"},
		{"no trailing newline", "SigIgn:\t1\nSigCgt:\t200", SignalMasks{Ignored: 1, Caught: 0x200}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSignalMasks(tc.status)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSignalMasksHandles(t *testing.T) {
	m := SignalMasks{Ignored: 1 << (syscall.SIGPIPE - 1), Caught: 1<<(syscall.SIGUSR1-1) | 1<<63}
	for _, tc := range []struct {
		sig  syscall.Signal
		want bool
	}{
		{syscall.SIGUSR1, true},  // caught
		{syscall.SIGPIPE, true},  // ignored: cannot end the process either
		{syscall.SIGUSR2, false}, // default action
		{syscall.SIGHUP, false},
		{64, true}, // the last real-time signal, bit 63
		{0, false},
		{65, false},
	} {
		if got := m.Handles(tc.sig); got != tc.want {
			t.Errorf("Handles(%d) = %v, want %v", tc.sig, got, tc.want)
		}
	}
}

// TestChildCatches reads the masks of real children: a handler or SIG_IGN
// counts, the default action does not, and a reaped child is an error.
func TestChildCatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		want   bool
	}{
		{"trap", `trap 'echo got' USR1; echo ready; while :; do sleep 0.05; done`, true},
		{"ignored", `trap '' USR1; echo ready; while :; do sleep 0.05; done`, true},
		{"default", `trap 'echo got' USR2; echo ready; while :; do sleep 0.05; done`, false},
	} {
		out := newLines()
		spec := sh(tc.script)
		spec.Stdout = out
		c := start(t, spec)
		if l := out.next(t); l != "ready" {
			t.Fatalf("%s: got %q", tc.name, l)
		}
		got, err := c.Catches(syscall.SIGUSR1)
		if err != nil || got != tc.want {
			t.Errorf("%s: Catches(SIGUSR1) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
		c.Kill()
		wait(t, c)
		if _, err := c.Catches(syscall.SIGUSR1); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("%s: after the exit: %v, want os.ErrProcessDone", tc.name, err)
		}
	}
}

func TestCatchesNoSuchProcess(t *testing.T) {
	// pid_max is at most 2^22: this pid cannot exist.
	if _, err := Catches(1<<22+1, syscall.SIGUSR1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want a not-exist error", err)
	}
}

// BenchmarkCatches is what the check adds to every live change's
// notification: one read and parse of /proc/<pid>/status.
func BenchmarkCatches(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := Catches(pid, syscall.SIGUSR1); err != nil {
			b.Fatal(err)
		}
	}
}
