package tenants

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
)

// Publish makes info this instance's published TenantInfo, in the
// directory of every GPU it lists. It returns at once: a goroutine writes
// the newest info, when it changed in a way that matters (anything but the
// own usage, or that by more than usedTolerance, at most once a second).
// The supervisor calls it after every event of its loop, so an info not
// worth writing is judged here and wakes nobody: a sample costs no
// hand-off to the writer. (One held back by the once-a-second rule is
// judged again at the next call.)
func (c *Coordinator) Publish(info api.TenantInfo) { c.pub.publish(info) }

// publisher writes this instance's TenantInfo into its GPUs' directories,
// on a goroutine of its own started by the first info worth writing: the
// newest info (next), judged against the one written last.
type publisher struct {
	runtimeDir, name string
	// write publishes data as this instance's file prefix+name in the
	// directory of each GPU (Coordinator.publishOwn).
	write func(gpus []string, prefix, what string, data []byte) error
	logf  func(format string, args ...any)

	mu sync.Mutex
	// next is the newest info to publish (when hasNext), held by value:
	// the loop publishes after every event, and keeping a copy costs no
	// allocation where a pointer to each would.
	next    api.TenantInfo
	hasNext bool
	last    *api.TenantInfo // the info written last, at lastAt
	lastAt  time.Time
	wake    chan struct{}
	done    chan struct{}
	closed  bool
}

func (p *publisher) publish(info api.TenantInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.next, p.hasNext = info, true
	if !worthWriting(p.last, &info, time.Since(p.lastAt)) {
		return
	}
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
		p.done = make(chan struct{})
		go p.run(p.wake)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close stops the writer, once it has written what it was writing, and
// returns the newest info it was given (nil: none): what to remove.
func (p *publisher) close() *api.TenantInfo {
	p.mu.Lock()
	p.closed = true
	wake, done := p.wake, p.done
	var last *api.TenantInfo
	if p.hasNext {
		n := p.next
		last = &n
	}
	p.mu.Unlock()
	if wake != nil {
		close(wake)
		<-done
	}
	return last
}

func (p *publisher) run(wake <-chan struct{}) {
	defer close(p.done)
	var written []fileID // what the last write left, per GPU of last
	for range wake {
		p.mu.Lock()
		if !p.hasNext {
			p.mu.Unlock()
			continue
		}
		info, last, since := new(api.TenantInfo), p.last, time.Since(p.lastAt)
		*info = p.next
		p.mu.Unlock()
		if !worthWriting(last, info, since) {
			continue
		}
		if !changed(last, info, since) && p.intact(*info, written) {
			// Only due for a look, and the files are as written: a
			// rewrite would cost a new file in each GPU's dir for nothing.
			p.mu.Lock()
			p.lastAt = time.Now()
			p.mu.Unlock()
			continue
		}
		if err := p.writeInfo(*info); err != nil {
			p.logf("%v", err)
			continue
		}
		written = p.infoFiles(*info)
		p.mu.Lock()
		p.last, p.lastAt = info, time.Now()
		p.mu.Unlock()
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
func (p *publisher) infoFiles(info api.TenantInfo) []fileID {
	ids := make([]fileID, len(info.GPUs))
	for i, g := range info.GPUs {
		dir, err := GPUDir(p.runtimeDir, g.UUID)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(dir, infoPrefix+p.name), &st) == nil {
			ids[i] = fileID{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim, size: st.Size}
		}
	}
	return ids
}

// intact reports whether every info file of info is the one written, as
// written (written: infoFiles right after the write).
func (p *publisher) intact(info api.TenantInfo, written []fileID) bool {
	if len(written) != len(info.GPUs) {
		return false
	}
	for i, id := range p.infoFiles(info) {
		if id == (fileID{}) || id != written[i] {
			return false
		}
	}
	return true
}

// writeInfo writes info into the directory of each GPU it lists.
func (p *publisher) writeInfo(info api.TenantInfo) error {
	info.Name = p.name
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	gpus := make([]string, len(info.GPUs))
	for i, g := range info.GPUs {
		gpus[i] = g.UUID
	}
	return p.write(gpus, infoPrefix, "the tenant info", b)
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
