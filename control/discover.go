package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/paths"
)

// Instance is a control socket found in a runtime dir.
type Instance struct {
	Name   string
	Dir    string
	Socket string
	// PID is the pid recorded in the instance's lock file, 0 if unknown.
	// It is only for display: the status reply is the authority.
	PID int
}

// Discover lists the sockets (*.sock) in dirs, sorted by name then dir. A
// missing dir holds no instance; a dir that cannot be read is reported in
// the error, alongside whatever the other dirs held. A socket whose
// instance died is listed too (it answers "connection refused"): Discover
// only reads; `gpuguard status` removes such sockets first (SweepStale),
// and the next instance of that name replaces its socket.
func Discover(dirs []string) ([]Instance, error) {
	var out []Instance
	var errs []error
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("listing runtime dir: %w", err))
			}
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".sock")
			if !ok || e.Type()&fs.ModeSocket == 0 || paths.ValidName(name) != nil {
				continue
			}
			out = append(out, Instance{
				Name:   name,
				Dir:    dir,
				Socket: filepath.Join(dir, e.Name()),
				PID:    lockPID(filepath.Join(dir, name+".lock")),
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Dir < out[j].Dir
	})
	return out, errors.Join(errs...)
}

// QueryStatus asks one instance for its status within timeout. An instance
// that does not answer comes back with State "unreachable" and Error
// saying why; one whose socket refuses connections is not running.
func QueryStatus(ctx context.Context, in Instance, timeout time.Duration) api.Status {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := queryStatus(ctx, in.Socket)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, syscall.ECONNREFUSED) {
			msg = "not running (stale socket: connection refused)"
		} else if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			msg = fmt.Sprintf("no answer within %v", timeout)
		}
		return api.Status{Name: in.Name, PID: in.PID, State: api.StateUnreachable, GPUs: []api.GPU{}, Error: msg}
	}
	if st.GPUs == nil {
		st.GPUs = []api.GPU{}
	}
	return st
}

func queryStatus(ctx context.Context, socket string) (api.Status, error) {
	c, err := Dial(ctx, socket)
	if err != nil {
		return api.Status{}, err
	}
	defer c.Close()
	return c.Status(ctx)
}

// QueryAll asks every instance at once; the result is in the same order.
func QueryAll(ctx context.Context, ins []Instance, timeout time.Duration) []api.Status {
	out := make([]api.Status, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() { out[i] = QueryStatus(ctx, in, timeout) })
	}
	wg.Wait()
	return out
}
