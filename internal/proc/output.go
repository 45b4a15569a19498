package proc

import (
	"io"
	"os"
	"sync"
	"time"
)

// plumbing wires the child's output. Files are handed to the child as they
// are; any other destination, and stderr when it is scanned, goes through a
// pipe that a copier drains.
type plumbing struct {
	stdout, stderr *os.File   // what the child gets; nil means /dev/null
	childEnds      []*os.File // write ends, closed here once the child holds them
	copiers        []*copier
}

// output returns the file to give the child for one stream: w itself when
// it is a file and nothing has to see the bytes, else the write end of a
// pipe whose reader copies to w (and to t). own is gpuguard's stream, used
// when w is nil. A nil result means /dev/null (gpuguard's own is closed).
func (p *plumbing) output(w io.Writer, own *os.File, t *tail) (*os.File, error) {
	if w == nil && usable(own) {
		w = own
	}
	if f, ok := w.(*os.File); ok && t == nil {
		return f, nil
	}
	if w == nil && t == nil {
		return nil, nil
	}
	r, cw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.childEnds = append(p.childEnds, cw)
	p.copiers = append(p.copiers, &copier{r: r, dst: w, tail: t, done: make(chan struct{})})
	return cw, nil
}

// usable reports whether gpuguard's own stream f is open: handing the
// child a closed descriptor would make the start fail.
func usable(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := f.Stat()
	return err == nil
}

// closeChildEnds closes gpuguard's copies of the pipes' write ends, so that
// the readers see EOF once the child's group is gone.
func (p *plumbing) closeChildEnds() {
	for _, f := range p.childEnds {
		f.Close()
	}
}

// start starts the copiers; abort is the alternative when the child could
// not be started.
func (p *plumbing) start() {
	for _, c := range p.copiers {
		go c.run()
	}
}

func (p *plumbing) abort() {
	for _, c := range p.copiers {
		c.r.Close()
	}
}

// drain waits for every copier to reach EOF, at most d in all, then closes
// the read ends. A grandchild that left the process group (setsid) can hold
// a pipe open forever; gpuguard must not wait for it. A copier stuck
// writing to its destination is not waited for either: it ends as soon as
// that write returns.
func (p *plumbing) drain(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
wait:
	for _, c := range p.copiers {
		select {
		case <-c.done:
		case <-timer.C:
			break wait
		}
	}
	p.abort()
}

// copier moves one output stream from its pipe to its destination.
type copier struct {
	r    *os.File
	dst  io.Writer // nil: keep the tail only
	tail *tail     // nil: pass through only
	done chan struct{}
}

func (c *copier) run() {
	defer close(c.done)
	buf := make([]byte, 32<<10)
	dst := c.dst
	for {
		n, err := c.r.Read(buf)
		if n > 0 {
			if c.tail != nil {
				c.tail.Write(buf[:n])
			}
			if dst != nil {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					// Keep reading: a child blocked on a full pipe would
					// stall because gpuguard's own output broke.
					dst = nil
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// tail is a ring buffer holding the last bytes written to it. It is safe
// for concurrent use: after a drain timeout the copier may still write
// while the exit is being recorded.
type tail struct {
	mu   sync.Mutex
	buf  []byte
	pos  int // where the next byte goes
	full bool
}

func newTail(size int) *tail {
	return &tail{buf: make([]byte, size)}
}

// Write keeps the last len(t.buf) bytes of everything written. It never
// fails.
func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.pos, t.full = 0, true
		return n, nil
	}
	k := copy(t.buf[t.pos:], p)
	copy(t.buf, p[k:])
	t.pos += len(p)
	if t.pos >= len(t.buf) {
		t.pos -= len(t.buf)
		t.full = true
	}
	return n, nil
}

// Bytes returns a copy of the kept bytes, oldest first.
func (t *tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return append([]byte{}, t.buf[:t.pos]...)
	}
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.pos:]...)
	return append(out, t.buf[:t.pos]...)
}
