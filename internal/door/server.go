package door

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/oklog/run"

	"github.com/gpuguard/gpuguard/internal/metrics"
)

// Config is what `gpuguard door` runs with.
type Config struct {
	Listen      string   // HOST:PORT for clients
	MetricsAddr string   // HOST:PORT for /metrics; "" for none
	RuntimeDirs []string // where the instances' control sockets are
	MaxBody     int64    // the largest body read to find its model
	Version     string   // gpuguard's version, for /api/version
	Logf        func(format string, args ...any)
	// Query asks an instance for its status; nil: over its control socket.
	Query QueryFunc
}

// ListenError is an address that could not be bound at start, with the
// flag that sets it.
type ListenError struct {
	Flag, Addr string
	Err        error
}

func (e *ListenError) Error() string {
	err := e.Err
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err // "bind: address already in use", without the address again
	}
	return fmt.Sprintf("%s %s: %v", e.Flag, e.Addr, err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Server is a door whose addresses are bound; Run serves it.
type Server struct {
	cfg     Config
	watcher *Watcher
	door    *Door
	metrics *Metrics
	ln, mln net.Listener
}

// Open binds the door's addresses before anything is served, so that an
// address in use is found at start (a *ListenError).
func Open(cfg Config) (*Server, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Server{cfg: cfg, watcher: NewWatcher(cfg.RuntimeDirs, cfg.Query, cfg.Logf)}
	var err error
	if s.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, &ListenError{Flag: "--listen", Addr: cfg.Listen, Err: err}
	}
	if cfg.MetricsAddr != "" {
		if s.mln, err = metrics.Listen(cfg.MetricsAddr); err != nil {
			s.ln.Close()
			return nil, &ListenError{Flag: "--metrics-addr", Addr: cfg.MetricsAddr, Err: err}
		}
		s.metrics = NewMetrics(func() int { return len(s.watcher.Table().Backends()) })
	}
	s.door = New(Options{Table: s.watcher.Table, MaxBody: cfg.MaxBody, Version: cfg.Version, Metrics: s.metrics, Logf: cfg.Logf})
	return s, nil
}

// Addr is the address clients connect to.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// shutdownTimeout is how long the requests in flight (streams included)
// get to finish once the door is told to stop.
const shutdownTimeout = 10 * time.Second

// Run finds the instances, then serves until ctx ends; requests in flight
// then get shutdownTimeout to finish.
func (s *Server) Run(ctx context.Context) error {
	s.watcher.Refresh(ctx) // the first table before the first request
	srv := &http.Server{
		Handler:           s.door,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          s.door.proxy.ErrorLog,
	}
	var g run.Group
	{
		wctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return s.watcher.Run(wctx) }, func(error) { cancel() })
	}
	g.Add(func() error {
		if err := srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving on %s: %w", s.ln.Addr(), err)
		}
		return nil
	}, func(error) {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		s.door.CloseIdleConnections()
	})
	if s.mln != nil {
		mctx, cancel := context.WithCancel(context.Background())
		g.Add(func() error { return metrics.Serve(mctx, s.mln, s.metrics.Handler()) }, func(error) { cancel() })
	}
	{
		rctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { <-rctx.Done(); return nil }, func(error) { cancel() })
	}
	return g.Run()
}
