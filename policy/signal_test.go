package policy

import (
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"TERM", syscall.SIGTERM},
		{"term", syscall.SIGTERM},
		{"sigusr1", syscall.SIGUSR1},
		{" SIGINT ", syscall.SIGINT},
		{"15", syscall.SIGTERM},
		{"SIGHUP", syscall.SIGHUP},
	}
	for _, tt := range tests {
		got, err := ParseSignal(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "SIGFOO", "FOO", "0", "-1", "9999", "SIG"} {
		if got, err := ParseSignal(in); err == nil {
			t.Errorf("ParseSignal(%q) = %v, want error", in, got)
		}
	}
}

func TestSignalName(t *testing.T) {
	if got := SignalName(syscall.SIGTERM); got != "SIGTERM" {
		t.Errorf("SignalName(SIGTERM) = %q", got)
	}
	if got := SignalName(0); got != "none" {
		t.Errorf("SignalName(0) = %q", got)
	}
}
