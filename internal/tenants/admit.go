package tenants

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/regfile"
	"github.com/gpuguard/gpuguard/internal/saturate"
	"golang.org/x/sys/unix"
)

// Admission across the tenants of a GPU. Every tenant publishes the sum of
// its outstanding leases in each watched GPU's directory (l.<name>) and
// holds a flock on live.<name> in <runtime>/gpus for as long as it runs.
// A reservation is decided under the GPU's admission lock (admit.lock),
// reading the other tenants' lease files: a file counts while its tenant
// holds its live lock. The kernel drops that lock when the tenant dies, so
// a dead tenant's leases go with it; a tenant that hangs or is stopped
// keeps its lock, so its leases keep counting. Nothing waits for another
// tenant's answer, which keeps a reservation fast however many tenants
// share the GPU.

const (
	leasePrefix = "l."
	livePrefix  = "live."
)

// Admission is the right to decide one reservation on a set of GPUs (the
// supervisor's word, api.Admission): Admit fills in the other tenants'
// leases and an Unlock that closes the GPUs' admission locks.
type Admission = api.Admission

// Admit takes the admission lock of every GPU in gpus (UUID order, each
// within LockWait; an error wrapping ErrLockHeld when one stays held) and
// reads the other tenants' leases on them. It fails too when this
// instance cannot publish its own leases (see SetLeases): a lease the
// others could not see could over-commit the GPU.
func (c *Coordinator) Admit(ctx context.Context, gpus []string) (*Admission, error) {
	if err := c.holdLive(); err != nil {
		return nil, err
	}
	var locks []*os.File
	a := &Admission{Others: make(map[string]uint64, len(gpus)), Unlock: func() {
		for _, f := range locks {
			f.Close()
		}
	}}
	dirs := map[string]string{}
	for _, g := range slices.Sorted(slices.Values(gpus)) {
		dir, err := GPUDir(c.o.RuntimeDir, g)
		if err == nil {
			var f *os.File
			if f, err = lockFile(ctx, filepath.Join(dir, admitLock), LockWait); err == nil {
				locks = append(locks, f)
				dirs[g] = dir
				continue
			}
		}
		a.Release()
		return nil, fmt.Errorf("the admission lock of GPU %s: %w", g, err)
	}
	alive := map[string]bool{}
	for g, dir := range dirs {
		c.maybeSweep(dir)
		ents, err := os.ReadDir(dir)
		if err != nil {
			a.Release()
			return nil, fmt.Errorf("reading the leases on GPU %s: %w", g, err)
		}
		for _, de := range ents {
			name, ok := strings.CutPrefix(de.Name(), leasePrefix)
			if !ok || name == c.o.Name {
				continue
			}
			n := readUint(filepath.Join(dir, de.Name()))
			if n == 0 {
				continue
			}
			live, seen := alive[name]
			if !seen {
				live = c.alive(name)
				alive[name] = live
			}
			if live {
				a.Others[g] = saturate.Add(a.Others[g], n)
			}
		}
	}
	return a, nil
}

// SetLeases publishes bytes as this instance's outstanding leases on each
// GPU in gpus. Calls must be serialised, each with the current figure.
// A figure that is too high for a while (a release not yet published) only
// makes the others more careful; one that is too low never happens as long
// as a lease is published before the admission lock it was granted under
// is released.
func (c *Coordinator) SetLeases(gpus []string, bytes uint64) error {
	return c.publishOwn(gpus, leasePrefix, "the leases", []byte(strconv.FormatUint(bytes, 10)))
}

// publishOwn writes data (what it is, for errors) as this instance's file
// prefix+Name in the directory of each GPU in gpus, replacing what it
// published there before.
// The others count such a file only while this instance holds its live
// lock, so that is taken first.
func (c *Coordinator) publishOwn(gpus []string, prefix, what string, data []byte) error {
	if err := c.holdLive(); err != nil {
		return err
	}
	var errs []error
	for _, g := range gpus {
		dir, err := GPUDir(c.o.RuntimeDir, g)
		if err == nil {
			err = writeReplace(dir, prefix+c.o.Name, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("publishing %s on GPU %s: %w", what, g, err))
		}
	}
	return errors.Join(errs...)
}

// holdLive takes, once, the flock that says this instance is running.
// The lock is taken without blocking, retried for LockWait: another tenant
// only holds it for the moment of a probe.
func (c *Coordinator) holdLive() error {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	if c.live != nil {
		return nil
	}
	dir := filepath.Join(c.o.RuntimeDir, gpusDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the tenants' dir: %w", err)
	}
	f, err := lockFile(context.Background(), filepath.Join(dir, livePrefix+c.o.Name), LockWait)
	if err != nil {
		return fmt.Errorf("taking this instance's live lock: %w", err)
	}
	c.live = f
	return nil
}

// alive reports whether the tenant name holds its live lock: its shared
// lock cannot be had. A tenant that never took it, or died, is not alive.
func (c *Coordinator) alive(name string) bool {
	f, err := regfile.OpenNoFollow(filepath.Join(c.o.RuntimeDir, gpusDir, livePrefix+name), os.O_RDONLY, 0)
	if errors.Is(err, regfile.ErrNotRegular) {
		return false // a FIFO or a link: no tenant locks that
	}
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // unreadable: count it, to be safe
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// readUint reads a file holding one decimal number; 0 when it is void
// (see readJSON).
func readUint(path string) uint64 {
	b, err := regfile.ReadSmall(path, MaxFileBytes)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}
