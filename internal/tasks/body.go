package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A task may carry bodies apart from its payload: a deferred HTTP
// request's body (up to 16 MiB), and once it is done its response's. A
// store writes a body in chunks as it is read, and reads it back a chunk
// at a time, so that neither is ever whole in gpuguard's memory: 24
// deferrals of 16 MiB at once cost the store 384 MiB, not gpuguard's RSS.

// ChunkSize is the size of a body's chunks in a store (the last may be
// shorter): the most of one body that gpuguard holds at once.
const ChunkSize = 256 << 10

// chunks lends the buffers that bodies are read into, so that a burst of
// deferrals reuses a few, rather than leaving garbage for the heap to
// grow by.
var chunks = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// ErrBody wraps an error reading the body a store was given (the client's
// or the child's, not the store's): nothing was stored.
var ErrBody = errors.New("reading the body")

// WriteChunks reads r to its end in chunks of ChunkSize and calls put with
// each, in order from 0 (chunk is only valid during the call). It answers
// the body's length. An error reading r is wrapped with ErrBody; put's
// error is returned as it is.
func WriteChunks(r io.Reader, put func(seq int, chunk []byte) error) (int64, error) {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	var n int64
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

// ChunkReader reads a body back from a store a chunk at a time: get
// answers chunk seq, and io.EOF past the last.
type ChunkReader struct {
	ctx  context.Context
	get  func(ctx context.Context, seq int) ([]byte, error)
	seq  int
	cur  []byte
	err  error
	done func()
}

// NewChunkReader reads with get; done (may be nil) runs once, at Close.
func NewChunkReader(ctx context.Context, get func(ctx context.Context, seq int) ([]byte, error), done func()) *ChunkReader {
	return &ChunkReader{ctx: ctx, get: get, done: done}
}

// fill makes cur hold the next bytes, or answers why none come (io.EOF
// at the end).
func (r *ChunkReader) fill() error {
	for len(r.cur) == 0 {
		if r.err != nil {
			return r.err
		}
		r.cur, r.err = r.get(r.ctx, r.seq)
		r.seq++
		if r.err != nil && r.err != io.EOF {
			r.err = fmt.Errorf("reading chunk %d of a stored body: %w", r.seq-1, r.err)
		}
	}
	return nil
}

func (r *ChunkReader) Read(p []byte) (int, error) {
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

// Close ends the reading.
func (r *ChunkReader) Close() error {
	if r.done != nil {
		r.done()
		r.done = nil
	}
	r.cur, r.err = nil, io.ErrClosedPipe
	return nil
}

// EmptyBody is a body of no bytes.
func EmptyBody() io.ReadCloser { return io.NopCloser(emptyReader{}) }

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }
