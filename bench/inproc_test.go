package bench

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/checkpoint"
	"github.com/gpuguard/gpuguard/internal/deliver"
	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/internal/metrics"
	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/internal/sharing"
	"github.com/gpuguard/gpuguard/internal/statefile"
	"github.com/gpuguard/gpuguard/internal/tenants"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor"
)

// inProcess is a supervisor wired as cmd/run_start.go wires it (sim probe,
// package proc, state file, checkpoint rotation, journal, metrics, control
// socket, the shared-GPU coordinator), run inside the benchmark so that its
// parts can be swapped or timed. edit, when set, edits the Deps and the
// coordinator (which the peers are then made of) before New.
type inProcess struct {
	sup  *supervisor.Supervisor
	done chan struct{}
	code int
	err  error
	stop func() // stops the child and waits for Run to return; idempotent
}

func runInProcess(b *testing.B, s *sandbox, name, policyText string, command []string, edit func(*supervisor.Deps, *sharing.Coordinator)) *inProcess {
	b.Helper()
	pol, err := policy.Parse([]byte(policyText), name+".toml")
	if err != nil {
		b.Fatal(err)
	}
	stateDir := filepath.Join(s.dir, name)
	simDir := filepath.Join(stateDir, "sim")
	srv, err := control.Listen(s.runDir, name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	probe, err := gpu.NewSim(gpu.SimOptions{Dir: simDir})
	if err != nil {
		b.Fatal(err)
	}
	jr, err := journal.Open(filepath.Join(stateDir, "events.jsonl"), journal.Options{Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { jr.Close() })
	cfg := supervisor.Config{
		Name: name, Policy: pol, Command: command,
		CheckpointPath: pol.Checkpoint.Resolve(stateDir), StatePath: filepath.Join(stateDir, "state.json"),
		SocketPath: srv.Path(), SimDir: simDir, BaseEnv: os.Environ(),
	}
	var sup *supervisor.Supervisor
	m := metrics.New(name, func() api.Status { return sup.Status() })
	coord := tenants.New(tenants.Options{RuntimeDir: s.runDir, Name: name, Logf: b.Logf})
	b.Cleanup(func() { coord.Close() })
	// Deferred tasks as cmd's, without a store: an instance without a queue.
	var tasks *deliver.Tasks
	deps := supervisor.Deps{
		Probe: probe, Launcher: launcher{}, Owned: proc.Descendants,
		WriteState: new(statefile.Writer).Write, RotateCheckpoint: checkpoint.Rotate,
		Observers: []supervisor.Observer{jr, m}, Publisher: srv, Meter: m,
		Tasks: func(in *supervisor.TaskHost) supervisor.Deliverer {
			tasks = deliver.New(in, deliver.Options{})
			return tasks
		},
	}
	var c sharing.Coordinator = coord
	if edit != nil {
		edit(&deps, &c)
	}
	deps.Peers = sharing.New(c, b.Logf)
	if sup, err = supervisor.New(cfg, deps); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The socket serves the supervisor, its admission and its tasks as one,
	// as cmd's socketBackend does.
	go srv.Serve(ctx, struct {
		*supervisor.Supervisor
		*supervisor.Admission
		*deliver.Tasks
	}{sup, sup.Admission(), tasks})
	ip := &inProcess{sup: sup, done: make(chan struct{})}
	go func() {
		ip.code, ip.err = sup.Run(ctx, nil)
		close(ip.done)
	}()
	var once sync.Once
	ip.stop = func() {
		once.Do(func() {
			cancel() // a stop: SIGTERM to the child
			select {
			case <-ip.done:
			case <-time.After(time.Minute):
				b.Error("in-process supervisor did not stop within a minute")
			}
			srv.Close()
			jr.Close()
		})
	}
	b.Cleanup(ip.stop)
	return ip
}

// launcher starts children with package proc, as cmd's procLauncher does.
type launcher struct{}

func (launcher) Launch(spec supervisor.LaunchSpec) (supervisor.Child, error) {
	c, err := proc.Start(proc.Spec{Argv: spec.Argv, Env: spec.Env, ScanStderr: spec.ScanStderr})
	if err != nil {
		return nil, err
	}
	return child{c}, nil
}

type child struct{ *proc.Child }

func (c child) Exit() supervisor.Exit { return supervisor.Exit(c.Child.Exit()) }
