package journal

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Defaults for Options, as in the contract's [journal] section.
const (
	DefaultMaxBytes = 16 << 20
	DefaultMaxFiles = 4
	// RecordEvery is how often a totals record is written when nothing
	// else (the run's start, a rotation) wrote one. It bounds what a
	// kill -9 costs the report: the supervised time after the last line.
	RecordEvery = 5 * time.Minute
	// queueLen events may wait for the writer; beyond that they are
	// dropped rather than blocking the supervisor.
	queueLen = 1024
)

// Options tune a Journal. The zero value is usable.
type Options struct {
	// Limits are the size and retention limits; a running journal can
	// change them (SetLimits).
	Limits
	// Totals, when set, keeps the cumulative figures of this run, which
	// the journal writes as totals records (report.Tally does).
	Totals Totals
	// Name fills in the name of records written before any event named
	// the instance.
	Name string
	// Logf reports write failures, once per streak of failures; nil
	// prints to stderr.
	Logf func(format string, args ...any)

	// ceiling is MaxRetained, lower in tests.
	ceiling int
}

// Limits are the journal's size and retention options.
type Limits struct {
	// MaxBytes is the size at which events.jsonl is rotated; 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxFiles is how many rotated files (events.jsonl.1 ... .MaxFiles)
	// are kept; 0 means DefaultMaxFiles, negative keeps none.
	MaxFiles int
	// MaxAge > 0 keeps rotated files younger than it even past MaxFiles
	// (up to MaxRetained files).
	MaxAge time.Duration
}

// setLimits puts l into o with the defaults applied.
func (o *Options) setLimits(l Limits) {
	o.Limits = l
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxFiles == 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	o.MaxFiles = max(o.MaxFiles, 0)
}

// Totals keeps a run's cumulative figures. The journal feeds it every line
// it writes (summaries, not the admissions they stand for), and writes
// Record's result as the first line of the run, as the first line of every
// file after a rotation, every RecordEvery, and at Close. A record thus
// counts exactly the lines before it, plus any a failed write lost.
type Totals interface {
	Add(ev api.Event)
	Record(now time.Time) api.Event
}

// Journal appends events to a file. Its methods are safe for concurrent use.
type Journal struct {
	path string
	opts Options
	fs   fsys

	// mu guards closed: senders hold it shared, Close exclusively, so
	// nobody sends on the closed queue.
	mu     sync.RWMutex
	closed bool
	queue  chan item
	done   chan struct{} // closed when the writer has finished

	last    atomic.Pointer[api.Event]
	dropped atomic.Uint64
	// limits are new limits for the writer to take (SetLimits); nil when
	// none are waiting.
	limits atomic.Pointer[Limits]

	// Owned by the writer goroutine.
	f          file
	size       int64
	failing    bool   // in a streak of failed writes
	lost       uint64 // events lost in the current streak
	torn       bool   // a failed write may have left part of a line
	capWarned  bool   // the MaxRetained ceiling has been logged
	batch      batch
	lastSec    time.Time // the second of the last summary written
	nextRecord time.Time
	name       string // the instance, as the last event named it
}

// item is one queued event, or (with flushed set) a marker the writer
// closes once everything queued before it is written, or (with wake set)
// only a nudge to take new limits.
type item struct {
	ev      api.Event
	flushed chan struct{}
	wake    bool
}

// Open opens (creating it 0600, and its directory 0700, if missing) the
// journal at path for appending, removes the rotated files the retention
// rule no longer keeps, and starts its writer.
func Open(path string, opts Options) (*Journal, error) {
	return open(path, opts, osFS{})
}

func open(path string, opts Options, fs fsys) (*Journal, error) {
	opts.setLimits(opts.Limits)
	if opts.ceiling == 0 {
		opts.ceiling = MaxRetained
	}
	if opts.Logf == nil {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "gpuguard: "+format+"\n", args...)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	f, size, err := fs.OpenAppend(path)
	if err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	j := &Journal{
		path: path, opts: opts, fs: fs,
		queue: make(chan item, queueLen), done: make(chan struct{}),
		f: f, size: size,
	}
	// A policy that keeps less than before applies now, not at the next
	// rotation; failing that is no reason not to supervise.
	if err := j.retain(time.Now(), false); err != nil {
		opts.Logf("journal: %v", err)
	}
	if opts.Totals != nil {
		// The run's first line, written here rather than by the writer:
		// on a busy host (one scheduler P) the writer may first run after
		// the child's start was observed, and a record timed then would
		// account the run from there, losing the time since the start.
		j.record(time.Now())
	}
	go j.write()
	return j, nil
}

// Observe queues ev for writing and returns at once. It satisfies
// supervisor.Observer. Events observed after Close are ignored.
func (j *Journal) Observe(ev api.Event) {
	j.last.Store(&ev)
	if !j.offer(item{ev: ev}) {
		j.dropped.Add(1)
	}
}

// offer queues it without waiting; it reports false when the queue is
// full (a closed journal takes nothing and reports true).
func (j *Journal) offer(it item) bool {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return true
	}
	select {
	case j.queue <- it:
		return true
	default:
		return false
	}
}

// SetLimits changes the size and retention limits of the running journal
// (a policy reload). The writer takes them before the next line it writes:
// a lower MaxBytes rotates at that line, and the rotated files the new
// limits no longer keep are removed then, as Open does. It returns at once;
// the supervisor loop calls it.
func (j *Journal) SetLimits(l Limits) {
	j.limits.Store(&l)
	j.offer(item{wake: true}) // a full queue wakes the writer anyway
}

// takeLimits applies limits that SetLimits left for the writer. The
// writer calls it for every item: with none waiting it costs one atomic
// swap, and no clock read.
func (j *Journal) takeLimits() {
	l := j.limits.Swap(nil)
	if l == nil {
		return
	}
	j.opts.setLimits(*l)
	j.capWarned = false
	if err := j.retain(time.Now(), false); err != nil {
		j.opts.Logf("journal: %v", err)
	}
}

// Last is the newest observed event (written or not), or nil.
func (j *Journal) Last() *api.Event {
	ev := j.last.Load()
	if ev == nil {
		return nil
	}
	c := *ev
	return &c
}

// Dropped is how many events were lost: queue full, write failed, or a line
// too big for the journal.
func (j *Journal) Dropped() uint64 { return j.dropped.Load() }

// Flush waits until every event observed before it has been written (or
// lost), except granted admissions, whose summary line is written when
// their second is over (or at Close). It is for callers that read the file
// right after writing.
func (j *Journal) Flush() {
	c := make(chan struct{})
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return
	}
	j.queue <- item{flushed: c} // may wait for room: the writer drains
	j.mu.RUnlock()
	<-c
}

// Close writes what is queued and the pending summary line, then a last
// totals record, closes the file and stops the writer. It is safe to call
// more than once.
func (j *Journal) Close() error {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.queue)
	}
	j.mu.Unlock()
	<-j.done
	if j.f == nil {
		return nil
	}
	f := j.f
	j.f = nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing the journal: %w", err)
	}
	return nil
}

// write is the writer goroutine. Besides the queue it waits for the end of
// the pending summary's second and for the next periodic record.
func (j *Journal) write() {
	defer close(j.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var armed time.Time
	for {
		if d := j.deadline(); !d.Equal(armed) {
			armed = d
			if d.IsZero() {
				timer.Stop()
			} else {
				timer.Reset(time.Until(d))
			}
		}
		select {
		case it, ok := <-j.queue:
			j.takeLimits()
			if !ok {
				j.finish(time.Now())
				return
			}
			if it.wake {
				continue
			}
			if it.flushed != nil {
				close(it.flushed)
				continue
			}
			j.handle(it.ev)
		case now := <-timer.C:
			armed = time.Time{}
			j.tick(now)
		}
	}
}

// deadline is when the writer must act without an event: the end of the
// pending summary's second, or the next periodic record; zero for never.
func (j *Journal) deadline() time.Time {
	var d time.Time
	if !j.batch.empty() {
		d = j.batch.end()
	}
	if j.opts.Totals != nil && (d.IsZero() || j.nextRecord.Before(d)) {
		d = j.nextRecord
	}
	return d
}

func (j *Journal) tick(now time.Time) {
	if !j.batch.empty() && !now.Before(j.batch.end()) {
		j.flushBatch(now)
	}
	if j.opts.Totals != nil && !now.Before(j.nextRecord) {
		j.record(now)
	}
}

// handle writes ev, or adds it to the pending summary. The order: a summary
// line follows every other line timed within its second and precedes every
// line timed after it (among events observed in time order).
func (j *Journal) handle(ev api.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now() // a line without a time is no event to a reader
	}
	if granted(ev) {
		sec := ev.Time.Truncate(time.Second)
		if !j.lastSec.IsZero() && !sec.After(j.lastSec) {
			sec = j.lastSec.Add(time.Second) // its second's line is out: the next one counts it
		}
		if !j.batch.empty() && sec.After(j.batch.sec) {
			j.flushBatch(ev.Time)
		}
		j.batch.add(sec, ev)
		return
	}
	if !j.batch.empty() && !ev.Time.Before(j.batch.end()) {
		j.flushBatch(ev.Time)
	}
	j.put(ev)
}

func (j *Journal) flushBatch(now time.Time) {
	j.lastSec = j.batch.sec
	j.put(j.batch.take(now))
}

// put writes one line and counts it in the totals (even if the write
// failed: the event happened).
func (j *Journal) put(ev api.Event) {
	if ev.Name != "" {
		j.name = ev.Name
	}
	j.append(ev)
	if j.opts.Totals != nil {
		j.opts.Totals.Add(ev)
	}
}

// record writes a totals record.
func (j *Journal) record(now time.Time) {
	j.append(j.totals(now))
	j.nextRecord = now.Add(RecordEvery)
}

func (j *Journal) totals(now time.Time) api.Event {
	ev := j.opts.Totals.Record(now)
	if ev.Name == "" {
		ev.Name = cmp.Or(j.name, j.opts.Name)
	}
	return ev
}

// finish writes what Close leaves pending: the summary and a last record.
func (j *Journal) finish(now time.Time) {
	if !j.batch.empty() {
		j.flushBatch(now)
	}
	if j.opts.Totals != nil {
		j.record(now)
	}
}
