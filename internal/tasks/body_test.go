package tasks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestBodiesGiveMemoryBack: memory is given back once no body has moved
// for Quiet after at least ReleaseAfter did, once per burst, never while
// one moves, and not after a burst too small to matter.
func TestBodiesGiveMemoryBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var released atomic.Int32
		b := NewBodies(func() { released.Add(1) })
		write := func(n int) {
			if _, err := b.Write(bytes.NewReader(make([]byte, n)), func(int, []byte) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		write(ReleaseAfter / 2)
		time.Sleep(2 * Quiet)
		if n := released.Load(); n != 0 {
			t.Fatalf("released %d times after %d bytes, want none", n, ReleaseAfter/2)
		}
		// A reader open all along holds the release off.
		r := b.Reader(context.Background(), func(_ context.Context, seq int, dst []byte) ([]byte, error) {
			if seq >= ReleaseAfter/ChunkSize {
				return nil, io.EOF
			}
			return dst, nil
		})
		write(ReleaseAfter)
		time.Sleep(2 * Quiet)
		if n := released.Load(); n != 0 {
			t.Fatalf("released %d times while a body was read", n)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		r.Close() // a second Close counts nothing
		time.Sleep(Quiet / 2)
		if n := released.Load(); n != 0 {
			t.Fatalf("released before the quiet: %d", n)
		}
		time.Sleep(Quiet)
		synctest.Wait()
		if n := released.Load(); n != 1 {
			t.Fatalf("released %d times after the burst, want once", n)
		}
		time.Sleep(5 * Quiet)
		if n := released.Load(); n != 1 {
			t.Fatalf("released %d times, want once a burst", n)
		}
	})
}

// TestChunkReader: Read and WriteTo give the chunks in order, an error
// of get is wrapped, and Close gives the buffer back and ends reads.
func TestChunkReader(t *testing.T) {
	b := NewBodies(func() {})
	chunks := [][]byte{bytes.Repeat([]byte("a"), ChunkSize), []byte("bc")}
	get := func(_ context.Context, seq int, dst []byte) ([]byte, error) {
		if seq >= len(chunks) {
			return nil, io.EOF
		}
		return dst[:copy(dst, chunks[seq])], nil
	}
	got, err := io.ReadAll(b.Reader(context.Background(), get))
	if err != nil || len(got) != ChunkSize+2 || string(got[ChunkSize:]) != "bc" {
		t.Fatalf("Read: %d bytes, %v", len(got), err)
	}
	var buf bytes.Buffer
	if n, err := b.Reader(context.Background(), get).WriteTo(&buf); err != nil || n != ChunkSize+2 || !bytes.Equal(buf.Bytes(), got) {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	boom := errors.New("boom")
	r := b.Reader(context.Background(), func(context.Context, int, []byte) ([]byte, error) { return nil, boom })
	if _, err := io.ReadAll(r); !errors.Is(err, boom) {
		t.Fatalf("a failing get: %v", err)
	}
	r = b.Reader(context.Background(), get)
	r.Close()
	if _, err := r.Read(make([]byte, 1)); err == nil {
		t.Fatal("a closed reader reads")
	}
}
