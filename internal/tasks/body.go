package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"
)

// A task may carry bodies apart from its payload: a deferred HTTP
// request's body (up to 16 MiB), and once it is done its response's. A
// store writes a body in chunks as it is read, and reads it back a chunk
// at a time, so that neither is ever whole in gpuguard's memory: 24
// deferrals of 16 MiB at once cost the store 384 MiB, not gpuguard's RSS.

// ChunkSize is the size of a body's chunks in a store (the last may be
// shorter): the most of one body that gpuguard holds at once.
const ChunkSize = 256 << 10

// ErrBody wraps an error reading the body a store was given (the client's
// or the child's, not the store's): nothing was stored.
var ErrBody = errors.New("reading the body")

// Bodies moves a store's bodies: it lends the chunk buffers (so that a
// burst of bodies reuses a few rather than leaving garbage for the heap to
// grow by), and gives memory back to the system once a burst is over.
// The zero value is ready to use; a store holds one.
//
// Giving memory back is debug.FreeOSMemory, the last resort, and the
// reason is this: what a store's client library allocates per chunk read
// (database/sql's driver copies every chunk into a new slice, go-redis
// every reply into a new string) is garbage that no buffer of ours can
// reuse, a chunk size of it per chunk; after a burst the heap holds it
// until the next collection, which an idle instance reaches only after
// minutes, and the runtime's scavenger returns freed pages at about 1 %
// of a CPU, which on a busy host took longer than 10 s for the tens of
// MiB a burst leaves (issue 42). So once no body has moved for Quiet
// after at least ReleaseAfter did, the heap is collected and its free
// pages returned at once.
type Bodies struct {
	pool sync.Pool

	mu     sync.Mutex
	active int   // bodies being moved now
	moved  int64 // bytes moved since memory was last given back
	timer  *time.Timer
	// release gives memory back; nil is debug.FreeOSMemory (tests set it).
	release func()
}

const (
	// Quiet is how long no body moves before memory is given back.
	Quiet = time.Second
	// ReleaseAfter is how much must have moved for that to be worth it.
	ReleaseAfter = 16 << 20
)

// NewBodies is Bodies with release in place of debug.FreeOSMemory.
func NewBodies(release func()) *Bodies { return &Bodies{release: release} }

func (b *Bodies) getBuf() *[]byte {
	if v := b.pool.Get(); v != nil {
		return v.(*[]byte)
	}
	buf := make([]byte, ChunkSize)
	return &buf
}

// begin counts a body being moved.
func (b *Bodies) begin() {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
}

// end counts n bytes moved by a body that has finished moving, and arms
// the release once none moves and enough did.
func (b *Bodies) end(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
	b.moved += n
	if b.active > 0 || b.moved < ReleaseAfter {
		return
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(Quiet, b.quiet)
		return
	}
	b.timer.Reset(Quiet)
}

func (b *Bodies) quiet() {
	b.mu.Lock()
	if b.active > 0 { // a body began meanwhile: its end arms it again
		b.mu.Unlock()
		return
	}
	b.moved = 0
	release := b.release
	b.mu.Unlock()
	if release == nil {
		release = debug.FreeOSMemory
	}
	release()
}

// Write reads r to its end in chunks of ChunkSize and calls put with
// each, in order from 0 (chunk is only valid during the call). It answers
// the body's length. An error reading r is wrapped with ErrBody; put's
// error is returned as it is.
func (b *Bodies) Write(r io.Reader, put func(seq int, chunk []byte) error) (n int64, err error) {
	b.begin()
	defer func() { b.end(n) }()
	bp := b.getBuf()
	defer b.pool.Put(bp)
	buf := *bp
	for seq := 0; ; seq++ {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if perr := put(seq, buf[:k]); perr != nil {
				return n, perr
			}
			n += int64(k)
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return n, nil
		case err != nil:
			return n, fmt.Errorf("%w: %w", ErrBody, err)
		}
	}
}

// NewBodyID names one body's chunks in a store: a fresh id per write, so
// that two writes of one task's body (a duplicate enqueue, two holders of
// a lease) never mix their chunks.
func NewBodyID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux
	return "b-" + hex.EncodeToString(b[:])
}

// GetChunk copies chunk seq of a body into dst (of ChunkSize) and answers
// it, or io.EOF past the last chunk.
type GetChunk func(ctx context.Context, seq int, dst []byte) ([]byte, error)

// Reader reads a body back with get, a chunk at a time, into one buffer
// lent for its life: reading a body costs no more than that, whatever its
// length.
func (b *Bodies) Reader(ctx context.Context, get GetChunk) *ChunkReader {
	b.begin()
	return &ChunkReader{b: b, ctx: ctx, get: get}
}

// ChunkReader is a body being read back from a store (Bodies.Reader).
type ChunkReader struct {
	b   *Bodies
	ctx context.Context
	get GetChunk

	mu     sync.Mutex // Close may come while the transport still reads
	buf    *[]byte
	seq    int
	n      int64
	cur    []byte
	err    error
	closed bool
}

// fill makes cur hold the next bytes, or answers why none come (io.EOF
// at the end); r.mu is held.
func (r *ChunkReader) fill() error {
	for len(r.cur) == 0 {
		if r.err != nil {
			return r.err
		}
		if r.buf == nil {
			r.buf = r.b.getBuf()
		}
		r.cur, r.err = r.get(r.ctx, r.seq, *r.buf)
		r.seq++
		r.n += int64(len(r.cur))
		if r.err != nil && r.err != io.EOF {
			r.err = fmt.Errorf("reading chunk %d of a stored body: %w", r.seq-1, r.err)
		}
	}
	return nil
}

func (r *ChunkReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// WriteTo writes each chunk as it comes (io.Copy uses it): no buffer of
// the copy's own.
func (r *ChunkReader) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for {
		if err := r.fill(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
		k, err := w.Write(r.cur)
		n += int64(k)
		r.cur = r.cur[k:]
		if err != nil {
			return n, err
		}
	}
}

// Close ends the reading and gives its buffer back.
func (r *ChunkReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.buf != nil {
		r.b.pool.Put(r.buf)
		r.buf = nil
	}
	r.cur, r.err = nil, io.ErrClosedPipe
	r.b.end(r.n)
	return nil
}

// EmptyBody is a body of no bytes.
func EmptyBody() io.ReadCloser { return io.NopCloser(emptyReader{}) }

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }
