package serve

import "sync"

// copyBufSize is the proxy's copy buffer, the size ReverseProxy allocates
// itself when it has no pool.
const copyBufSize = 32 << 10

// bufferPool lends the proxy its response copy buffers. Without one,
// ReverseProxy allocates and zeroes 32 KiB per request: for a small
// answer that was more than half of all the bytes the door allocated
// (a memory profile of BenchmarkDoorLatency), and the GC work with it.
// A buffer is back in the pool only once copyResponse has returned, so no
// two requests share one.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufSize)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) < copyBufSize {
		return
	}
	buf = buf[:copyBufSize]
	b.p.Put(&buf)
}
