package proc

import (
	"errors"
	"io"
	"time"
)

// Defaults applied to a zero Spec field.
const (
	// DefaultTailSize is how much of stderr is kept: the contract
	// classifies OOMs by the last 64 KiB.
	DefaultTailSize = 64 << 10
	// DefaultDrainTimeout bounds reading the child's output after its main
	// process has exited: the contract allows at most 1 s.
	DefaultDrainTimeout = time.Second
)

// Spec describes one child to start.
type Spec struct {
	// Argv is the command and its arguments, exec'd as is (no shell).
	// Argv[0] without a slash is looked up in the PATH of Env.
	Argv []string
	// Env is the child's complete environment, KEY=VALUE. Nil means
	// gpuguard's own environment, as with os/exec.
	Env []string
	// Dir is the child's working directory; "" = gpuguard's. A relative
	// Argv[0] containing a slash is relative to Dir.
	Dir string
	// ScanStderr keeps the last TailSize bytes of stderr in Exit.Stderr
	// while copying the stream unchanged to Stderr. Without it the child
	// writes to Stderr directly (still a terminal when gpuguard's is) and
	// Exit.Stderr is nil.
	ScanStderr bool
	// Stdout and Stderr are where the child's output goes; nil means
	// gpuguard's own. An *os.File is handed to the child as is (no pipe,
	// no copying goroutine); any other writer is fed through a pipe.
	Stdout, Stderr io.Writer
	// TailSize is how many bytes of stderr to keep; 0 = DefaultTailSize.
	TailSize int
	// DrainTimeout bounds how long output is still read after the main
	// process has exited; 0 = DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Cgroups, when set, starts the child in a cgroup v2 of its own that
	// is killed as a whole with the process group, which also gets the
	// processes that left the group (setsid). Nil: the process group only.
	Cgroups *Cgroups
	// Reaper, when set, is told about the child so that it never reaps
	// the child's main process. A process with a Reaper must pass it to
	// every Start.
	Reaper *Reaper
}

// withDefaults checks s and fills in its zero fields.
func (s Spec) withDefaults() (Spec, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return s, errors.New("no command to start")
	}
	if s.TailSize < 0 {
		return s, errors.New("negative stderr tail size")
	}
	if s.DrainTimeout < 0 {
		return s, errors.New("negative drain timeout")
	}
	if s.TailSize == 0 {
		s.TailSize = DefaultTailSize
	}
	if s.DrainTimeout == 0 {
		s.DrainTimeout = DefaultDrainTimeout
	}
	return s, nil
}
