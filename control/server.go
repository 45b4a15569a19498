package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/paths"
)

// Backend is what the server asks. The supervisor implements it; every
// method may be called from several connections at once.
type Backend interface {
	Status() api.Status
	// Step changes profile now ("down" or "up") and returns the new
	// profile once the state file is written and the event published; it
	// fails past either end of the ladder.
	Step(ctx context.Context, direction string) (profile string, err error)
	// MarkOOM records that the child's coming exit is an OOM.
	MarkOOM(detail string)
	Reserve(ctx context.Context, r admission.Request) (admission.Decision, error)
	// Release ends a lease; an unknown lease is an error.
	Release(ctx context.Context, lease string) error
}

// Bounds. Each is a field of Server's bounds so tests can shrink them.
const (
	// DefaultMaxConns caps concurrent connections; beyond it a connection
	// gets an error line and is closed.
	DefaultMaxConns = 128
	// DefaultWriteTimeout is how long one write to a peer may block before
	// the peer is dropped: a client that never reads holds nothing else.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultSubscriberBuffer is how many profile events may wait for a
	// slow subscriber before it is dropped.
	DefaultSubscriberBuffer = 64
	// DefaultLineTimeout is how long a line may take from its first byte
	// to its newline; then the connection is closed.
	DefaultLineTimeout = 10 * time.Second
	// DefaultLaneConns caps the connections admitted over DefaultMaxConns,
	// each for one request that laneType allows (status, the child's oom and
	// ready), read within DefaultLaneTimeout.
	DefaultLaneConns   = 64
	DefaultLaneTimeout = time.Second
)

// bounds are what one peer may hold of the server: connections, time per
// line and per write, queued events, and who may connect at all. They are
// the Default* constants, except where a test shrinks one.
type bounds struct {
	maxConns     int
	laneConns    int
	writeTimeout time.Duration
	lineTimeout  time.Duration
	laneTimeout  time.Duration
	subBuffer    int
	allowPeer    func(uid uint32) bool
}

func defaultBounds() bounds {
	return bounds{
		maxConns:     DefaultMaxConns,
		laneConns:    DefaultLaneConns,
		writeTimeout: DefaultWriteTimeout,
		lineTimeout:  DefaultLineTimeout,
		laneTimeout:  DefaultLaneTimeout,
		subBuffer:    DefaultSubscriberBuffer,
		allowPeer:    sameUserOrRoot(os.Geteuid()),
	}
}

// Server is one instance's control socket. It holds the instance lock from
// Listen to Close.
type Server struct {
	name, path, lockPath string
	ln                   *net.UnixListener
	lock                 *os.File

	lim bounds

	closeOnce sync.Once
	wg        sync.WaitGroup // connection goroutines

	mu       sync.Mutex
	serving  bool
	closed   bool // Close called, or Serve shutting down: accept no more
	conns    map[*conn]struct{}
	lanes    int // conns admitted over maxConns (also in conns)
	subs     map[*subscriber]struct{}
	closeErr error
}

// Listen takes the instance lock <dir>/<name>.lock and binds
// <dir>/<name>.sock (mode 0600), creating dir (0700) if missing. If another
// live process holds the lock, the error matches ErrAlreadyRunning and
// nothing in dir is touched. A socket file left by a dead instance is
// replaced.
func Listen(dir, name string) (*Server, error) {
	if err := paths.ValidName(name); err != nil {
		return nil, err
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	s := &Server{
		name:     name,
		path:     paths.Socket(dir, name),
		lockPath: filepath.Join(dir, name+".lock"),
		lim:      defaultBounds(),
		conns:    make(map[*conn]struct{}),
		subs:     make(map[*subscriber]struct{}),
	}
	lock, err := acquireLock(s.lockPath, name)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	ln, err := bindPrivate(dir, s.path)
	if err != nil {
		os.Remove(s.lockPath)
		lock.Close()
		return nil, err
	}
	s.ln = ln
	return s, nil
}

// Path is the socket's absolute path (for GPUGUARD_SOCKET).
func (s *Server) Path() string { return s.path }

// Serve accepts connections and answers them from b until ctx is done or
// Close is called; it returns once every connection has ended. It returns
// nil on an orderly stop.
func (s *Server) Serve(ctx context.Context, b Backend) error {
	s.mu.Lock()
	if s.serving || s.closed {
		s.mu.Unlock()
		return errors.New("control: Serve called twice or after Close")
	}
	s.serving = true
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()

	err := s.acceptLoop(ctx, b)

	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	cancel() // unblocks Backend calls made for connections
	s.wg.Wait()
	return err
}

func (s *Server) acceptLoop(ctx context.Context, b Backend) error {
	var delay time.Duration
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || s.isClosed() {
				return nil
			}
			if !temporaryAccept(err) {
				return fmt.Errorf("control socket: %w", err)
			}
			// Out of file descriptors and the like: wait rather than spin.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		delay = 0
		s.admit(ctx, nc, b)
	}
}

// admit starts a connection's goroutine. Past maxConns a connection is
// admitted to the lane (one request that laneType allows, see serveLane) while it
// has room, so that slow or idle clients holding every connection cannot
// silence the child's OOM report or an operator's status; past that it is
// refused. The refusal is written from the accept loop (writeNow).
func (s *Server) admit(ctx context.Context, nc *net.UnixConn, b Backend) {
	s.mu.Lock()
	regular := len(s.conns) - s.lanes
	lane := regular >= s.lim.maxConns
	if s.closed || lane && s.lanes >= s.lim.laneConns {
		full := !s.closed
		s.mu.Unlock()
		if full {
			writeNow(nc, errorLine(nil, fmt.Errorf("too many connections (limit %d)", s.lim.maxConns)))
		}
		nc.Close()
		return
	}
	c := &conn{s: s, nc: nc, lane: lane, done: make(chan struct{})}
	s.conns[c] = struct{}{}
	if lane {
		s.lanes++
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c.serve(ctx, b)
		c.endTasks()
		s.forget(c)
	}()
}

// writeNow writes line to nc without blocking: what the socket's buffer
// takes, at once (a refusal's line fits in a fresh socket's). A write
// deadline would not do: on a loaded machine it can pass before the write
// is even tried, and the refused client would read nothing but the close.
func writeNow(nc *net.UnixConn, line []byte) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Write(func(fd uintptr) bool {
		_, _ = syscall.Write(int(fd), line)
		return true // written or not, never wait
	})
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.lane {
		s.lanes--
	}
	if c.sub != nil {
		delete(s.subs, c.sub)
	}
	s.mu.Unlock()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func temporaryAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Publish sends a profile event to every subscriber. It never blocks: each
// subscriber has a bounded queue, and one whose queue is full is dropped
// (it gets an error line and its connection is closed), because a
// subscriber that silently missed an event would act on a stale profile.
func (s *Server) Publish(st api.ProfileState) {
	st.Type = EventProfile
	b := encodeLine(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		select {
		case sub.events <- b:
		default:
			delete(s.subs, sub)
			close(sub.dropped)
		}
	}
}

// subscribe registers c's subscriber; events queue until its writer runs.
func (s *Server) subscribe(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[sub] = struct{}{}
}

// Close stops Serve (which returns once every connection has ended),
// removes the socket and the lock file, and releases the instance lock.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		// Remove the socket first so new clients see "no such instance"
		// rather than "connection refused".
		var errs []error
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		// Unlink while still locked: see acquireLock for the race this
		// leaves and how the next Listen closes it.
		if err := os.Remove(s.lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		if err := s.lock.Close(); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
