package tenants

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/policy"
)

// PeerTimeout bounds every question to another tenant. A tenant that has
// not answered by then (hung, SIGSTOPped, overloaded) drops out of that
// decision.
const PeerTimeout = 500 * time.Millisecond

// silentFor is how long a tenant that did not answer a step in time is
// passed over: while it stays stopped, each decision need not wait for it.
const silentFor = 10 * PeerTimeout

// infoPrefix names a tenant's published TenantInfo in a GPU's directory.
const infoPrefix = "t."

// Who the tenants of a GPU are, and what they can do, is read from the
// files they publish in its directory (t.<name>), each counting while its
// tenant holds its live lock, as the leases do. Asking every tenant over
// its socket at the moment of a decision would wake them all, and a
// decision on a busy GPU must be quick; only the chosen tenant is asked.
// A tenant that died drops out at once (its lock is gone); one that hangs
// or is stopped is chosen, does not answer within PeerTimeout, and is
// passed over for silentFor.

// tenants reads the other tenants of the GPU whose directory is dir: those
// whose live lock is held and that have not been silent lately.
func (c *Coordinator) tenants(dir string) []Candidate {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	now := time.Now()
	var out []Candidate
	for _, de := range ents {
		name, ok := strings.CutPrefix(de.Name(), infoPrefix)
		if !ok || name == c.o.Name || paths.ValidName(name) != nil || c.isSilent(name, now) {
			continue
		}
		var info api.TenantInfo
		if !readJSON(filepath.Join(dir, de.Name()), &info) || !c.alive(name) {
			continue
		}
		info.Name = name // the file's name is the identity
		clampInfo(&info)
		out = append(out, Candidate{TenantInfo: info, Socket: c.socket(name)})
	}
	return out
}

func (c *Coordinator) isSilent(name string, now time.Time) bool {
	c.silentMu.Lock()
	defer c.silentMu.Unlock()
	until, ok := c.silent[name]
	if ok && !now.Before(until) {
		delete(c.silent, name)
		return false
	}
	return ok
}

// passOver records that name did not answer in time.
func (c *Coordinator) passOver(name string) {
	c.silentMu.Lock()
	c.silent[name] = time.Now().Add(silentFor)
	c.silentMu.Unlock()
}

// Publish makes info this instance's published TenantInfo, in the
// directory of every GPU it lists. It returns at once: a goroutine writes
// the newest info, when it changed in a way that matters (anything but the
// own usage, or that by more than usedTolerance, at most once a second).
// The supervisor calls it after every event of its loop, so an info not
// worth writing is judged here and wakes nobody: a sample costs no
// hand-off to the writer. (One held back by the once-a-second rule is
// judged again at the next call.)
func (c *Coordinator) Publish(info api.TenantInfo) {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if c.pubClosed {
		return
	}
	c.pubNext = &info
	if !worthWriting(c.pubLast, &info, time.Since(c.pubLastAt)) {
		return
	}
	if c.pubWake == nil {
		c.pubWake = make(chan struct{}, 1)
		c.pubDone = make(chan struct{})
		go c.publisher(c.pubWake)
	}
	select {
	case c.pubWake <- struct{}{}:
	default:
	}
}

func (c *Coordinator) publisher(wake <-chan struct{}) {
	defer close(c.pubDone)
	var written []fileID // what the last write left, per GPU of pubLast
	for range wake {
		c.pubMu.Lock()
		info, last, since := c.pubNext, c.pubLast, time.Since(c.pubLastAt)
		c.pubMu.Unlock()
		if info == nil || !worthWriting(last, info, since) {
			continue
		}
		if !changed(last, info, since) && c.intact(*info, written) {
			// Only due for a look, and the files are as written: a
			// rewrite would cost a new file in each GPU's dir for nothing.
			c.pubMu.Lock()
			c.pubLastAt = time.Now()
			c.pubMu.Unlock()
			continue
		}
		if err := c.writeInfo(*info); err != nil {
			c.o.Logf("%v", err)
			continue
		}
		written = c.infoFiles(*info)
		c.pubMu.Lock()
		c.pubLast, c.pubLastAt = info, time.Now()
		c.pubMu.Unlock()
	}
}

// republishEvery is how often an unchanged info is looked at, so that one
// a stranger spoiled or removed (see sweep) is written again soon. Looking
// is one lstat per GPU; the info is rewritten only when a file is not the
// one this instance wrote, as it wrote it.
const republishEvery = 10 * time.Second

// fileID tells whether a file is still the one that was written: a
// rename over it changes the inode, a write in place or a chmod its
// change time.
type fileID struct {
	dev, ino uint64
	ctime    unix.Timespec
	size     int64
}

// infoFiles identifies this instance's info file in the dir of each GPU
// of info, in order; a file it cannot stat is a zero fileID, which no
// file matches.
func (c *Coordinator) infoFiles(info api.TenantInfo) []fileID {
	ids := make([]fileID, len(info.GPUs))
	for i, g := range info.GPUs {
		dir, err := GPUDir(c.o.RuntimeDir, g.UUID)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dir, infoPrefix+c.o.Name), &st) == nil {
			ids[i] = fileID{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim, size: st.Size}
		}
	}
	return ids
}

// intact reports whether every info file of info is the one written, as
// written (written: infoFiles right after the write).
func (c *Coordinator) intact(info api.TenantInfo, written []fileID) bool {
	if len(written) != len(info.GPUs) {
		return false
	}
	for i, id := range c.infoFiles(info) {
		if id == (fileID{}) || id != written[i] {
			return false
		}
	}
	return true
}

// usedTolerance is the least change of a tenant's own usage worth
// publishing (it only breaks ties in the ranking).
const usedTolerance = 64 << 20

// worthWriting says whether the writer has something to do for next: it
// changed (see changed), or republishEvery has passed since the last
// write or look, and the files are due for a look.
func worthWriting(last, next *api.TenantInfo, since time.Duration) bool {
	return since >= republishEvery || changed(last, next, since)
}

// changed says whether next differs from the last written info (nil:
// none yet) in a way the other tenants' rankings can use. Of the state
// they read only whether it can step (canStep): a child that goes from
// starting to running, or an instance from waiting to backoff, changes
// nothing for them, and a restart writes the file twice rather than three
// times (each write is a new file in the GPU's dir). Of making room's facts
// only those an ask does not read live count (roomChanged).
func changed(last, next *api.TenantInfo, since time.Duration) bool {
	if last == nil {
		return true
	}
	a, b := last, next
	if a.PID != b.PID || a.Priority != b.Priority || a.Scope != b.Scope || a.Observe != b.Observe || canStep(a.State) != canStep(b.State) ||
		a.Level != b.Level || a.Levels != b.Levels || a.GraceSeconds != b.GraceSeconds || a.SettleSeconds != b.SettleSeconds ||
		len(a.GPUs) != len(b.GPUs) || roomChanged(a.Room, b.Room) {
		return true
	}
	moved := false
	for i := range last.GPUs {
		if last.GPUs[i].UUID != next.GPUs[i].UUID {
			return true
		}
		d := int64(next.GPUs[i].UsedBytes) - int64(last.GPUs[i].UsedBytes)
		moved = moved || d > usedTolerance || d < -usedTolerance
	}
	return moved && since >= time.Second
}

// writeInfo writes info into the directory of each GPU it lists.
func (c *Coordinator) writeInfo(info api.TenantInfo) error {
	info.Name = c.o.Name
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	gpus := make([]string, len(info.GPUs))
	for i, g := range info.GPUs {
		gpus[i] = g.UUID
	}
	return c.publishOwn(gpus, infoPrefix, "the tenant info", b)
}

// ask sends `tenant` to one socket, within PeerTimeout.
func (c *Coordinator) ask(ctx context.Context, socket string) (api.TenantInfo, error) {
	return request(ctx, c.o.PeerTimeout, socket, (*control.Client).Tenant)
}

// request makes one request on its own connection to socket, within
// timeout: every question to another tenant is bounded.
func request[T any](ctx context.Context, timeout time.Duration, socket string, do func(*control.Client, context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := control.Dial(ctx, socket)
	if err != nil {
		var zero T
		return zero, err
	}
	defer cl.Close()
	return do(cl, ctx)
}

// socket is the control socket of the instance name in the runtime dir.
func (c *Coordinator) socket(name string) string { return paths.Socket(c.o.RuntimeDir, name) }

// clampInfo holds what a peer published to the ranges policy validation
// allows, so that a forged file ranks no lower than priority -1000 and
// claims no longer cadence than a policy could.
func clampInfo(t *api.TenantInfo) {
	t.Priority = min(max(t.Priority, -policy.MaxPriority), policy.MaxPriority)
	t.GraceSeconds = clampSeconds(t.GraceSeconds, 0, policy.MaxDuration)
	t.SettleSeconds = clampSeconds(t.SettleSeconds, 0, policy.MaxDuration)
}
