package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/supervisor"
)

// Options is what the launcher needs of the run.
type Options struct {
	// Name and Socket identify the instance, as its lock does: its
	// cgroups are named after both.
	Name   string
	Socket string
	// CgroupParent is $GPUGUARD_CGROUP ("" = gpuguard's own cgroup,
	// "off").
	CgroupParent string
	Logf         func(format string, args ...any)
}

// Launcher starts children with package proc. Both fields may be nil.
type Launcher struct {
	reaper  *proc.Reaper
	cgroups *proc.Cgroups
	logf    func(format string, args ...any)
}

// New sets up the cleanup that goes beyond the child's process group
// (docs/reliability.md): gpuguard becomes a child subreaper that reaps
// orphans, and, where cgroup v2 is writable, each child gets a cgroup of
// its own. What cannot be set up is logged, and the launcher works
// without it. Call it while holding the instance lock: it kills what an
// earlier, SIGKILLed instance of the same name left in its cgroups.
func New(o Options) *Launcher {
	l := &Launcher{logf: o.Logf}
	var err error
	if l.reaper, err = proc.NewReaper(); err != nil {
		o.Logf("%v: orphaned grandchildren are left to init", err)
	}
	sock, _ := filepath.Abs(o.Socket)
	sum := sha256.Sum256([]byte(sock)) // the instance is (runtime dir, name), as its lock
	key := o.Name + "-" + hex.EncodeToString(sum[:4])
	if l.cgroups, err = proc.OpenCgroups(o.CgroupParent, key, o.Logf); err != nil && o.CgroupParent != proc.CgroupsOff {
		o.Logf("no cgroup per child (%v): a process that leaves the child's process group is not cleaned up", err)
	}
	return l
}

// Close lets go of the cgroups and the subreaper, once no child runs.
func (l *Launcher) Close() {
	if l.cgroups != nil {
		if err := l.cgroups.Close(); err != nil {
			l.logf("%v", err)
		}
	}
	if l.reaper != nil {
		_ = l.reaper.Close()
	}
}

// Launch starts spec's child.
func (l *Launcher) Launch(spec supervisor.LaunchSpec) (supervisor.Child, error) {
	c, err := proc.Start(proc.Spec{Argv: spec.Argv, Env: spec.Env, ScanStderr: spec.ScanStderr,
		Cgroups: l.cgroups, Reaper: l.reaper})
	if err != nil {
		return nil, err
	}
	return child{c}, nil
}

// Check finds out, before the supervisor writes anything for a start,
// whether spec's command can run (proc.Check: a *proc.RunError if not).
func (l *Launcher) Check(spec supervisor.LaunchSpec) error {
	return proc.Check(proc.Spec{Argv: spec.Argv, Env: spec.Env})
}

// child adapts *proc.Child to supervisor.Child (the Exit types match)
// and to supervisor.SignalChecker (Catches reads /proc/<pid>/status).
type child struct{ *proc.Child }

func (c child) Exit() supervisor.Exit { return supervisor.Exit(c.Child.Exit()) }
