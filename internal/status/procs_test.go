package status

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

func TestDescribeProcesses(t *testing.T) {
	gpus := []api.GPU{{Processes: []api.GPUProcess{{PID: os.Getpid()}, {PID: 1 << 30}}}}
	describeProcesses(context.Background(), gpus)
	self := gpus[0].Processes[0]
	exe, _ := os.Executable()
	if want := filepath.Base(exe); len(want) > 15 {
		want = want[:15] // the kernel's comm is 15 bytes
		if self.Command != want && self.Command != filepath.Base(exe) {
			t.Errorf("command %q, want %q", self.Command, want)
		}
	} else if self.Command != want {
		t.Errorf("command %q, want %q", self.Command, want)
	}
	if u, err := user.Current(); err == nil && self.User != u.Username {
		t.Errorf("user %q, want %q", self.User, u.Username)
	}
	if gone := gpus[0].Processes[1]; gone.Command != "" || gone.User != "" {
		t.Errorf("a pid that does not exist got %+v", gone)
	}
}
