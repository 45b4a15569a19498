package journal

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/gpuguard/gpuguard/api"
)

// Defaults for Options.
const (
	DefaultMaxBytes = 16 << 20
	DefaultKeep     = 3
	// queueLen events may wait for the writer; beyond that they are
	// dropped rather than blocking the supervisor.
	queueLen = 1024
)

// Options tune a Journal. The zero value is usable.
type Options struct {
	// MaxBytes is the size at which events.jsonl is rotated; 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// Keep is how many rotated files (events.jsonl.1 ... .Keep) are
	// kept; 0 means DefaultKeep, negative keeps none.
	Keep int
	// Logf reports write failures, once per streak of failures; nil
	// prints to stderr.
	Logf func(format string, args ...any)
}

// file is what the journal writes to: an *os.File, or a failing fake in
// tests.
type file interface {
	io.Writer
	io.Closer
}

// openFunc opens the journal file for appending and returns its size.
type openFunc func(path string) (file, int64, error)

// Journal appends events to a file. Its methods are safe for concurrent use.
type Journal struct {
	path string
	opts Options
	open openFunc

	// mu guards closed: senders hold it shared, Close exclusively, so
	// nobody sends on the closed queue.
	mu     sync.RWMutex
	closed bool
	queue  chan item
	done   chan struct{} // closed when the writer has finished

	last    atomic.Pointer[api.Event]
	dropped atomic.Uint64

	// Owned by the writer goroutine.
	f       file
	size    int64
	failing bool   // in a streak of failed writes
	lost    uint64 // events lost in the current streak
	torn    bool   // a failed write may have left part of a line
}

// item is one queued event, or (with flushed set) a marker the writer
// closes once everything queued before it is written.
type item struct {
	ev      api.Event
	flushed chan struct{}
}

// Open opens (creating it 0600, and its directory 0700, if missing) the
// journal at path for appending and starts its writer.
func Open(path string, opts Options) (*Journal, error) {
	return open(path, opts, openAppend)
}

func openAppend(path string) (file, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func open(path string, opts Options, openf openFunc) (*Journal, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Keep < 0 {
		opts.Keep = 0
	}
	if opts.Logf == nil {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "gpuguard: "+format+"\n", args...)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	f, size, err := openf(path)
	if err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	j := &Journal{
		path: path, opts: opts, open: openf,
		queue: make(chan item, queueLen), done: make(chan struct{}),
		f: f, size: size,
	}
	go j.write()
	return j, nil
}

// Observe queues ev for writing and returns at once. It satisfies
// supervisor.Observer. Events observed after Close are ignored.
func (j *Journal) Observe(ev api.Event) {
	j.last.Store(&ev)
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		return
	}
	select {
	case j.queue <- item{ev: ev}:
	default:
		j.dropped.Add(1)
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
// lost). It is for callers that read the file right after writing.
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

// Close writes what is queued, closes the file and stops the writer. It is
// safe to call more than once.
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

// write is the writer goroutine.
func (j *Journal) write() {
	defer close(j.done)
	for it := range j.queue {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		j.append(it.ev)
	}
}

// append writes one event as one line with one Write call.
func (j *Journal) append(ev api.Event) {
	line, err := json.Marshal(ev)
	if err != nil {
		j.fail(fmt.Errorf("encoding a %s event: %w", ev.Event, err))
		return
	}
	if j.torn {
		// End the fragment a failed write may have left, so it costs one
		// unreadable line instead of also spoiling this one.
		line = append([]byte{'\n'}, line...)
	}
	line = append(line, '\n')
	if int64(len(line)) > j.opts.MaxBytes {
		j.fail(fmt.Errorf("a %s event of %d bytes exceeds the journal's max size %d", ev.Event, len(line), j.opts.MaxBytes))
		return
	}
	if j.f == nil { // the last rotation failed half-way
		if err := j.reopen(); err != nil {
			j.fail(err)
			return
		}
	}
	if j.size > 0 && j.size+int64(len(line)) > j.opts.MaxBytes {
		if err := j.rotate(); err != nil {
			j.fail(err)
			return
		}
	}
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		j.torn = j.torn || n > 0
		j.fail(fmt.Errorf("writing %s: %w", j.path, err))
		return
	}
	j.torn = false
	if j.failing {
		j.opts.Logf("journal: writing again after losing %d event(s)", j.lost)
		j.failing, j.lost = false, 0
	}
}

// fail counts a lost event and logs the first failure of a streak.
func (j *Journal) fail(err error) {
	j.dropped.Add(1)
	j.lost++
	if !j.failing {
		j.failing = true
		j.opts.Logf("journal: %v (events are lost until writing works again)", err)
	}
}
