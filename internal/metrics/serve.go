package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listen binds addr before anything else starts, so that a port in use is a
// configuration error reported before the child is launched rather than a
// failure discovered while it already holds GPU memory.
func Listen(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, errors.New("metrics: empty listen address")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	return ln, nil
}

// shutdownTimeout bounds how long an in-flight scrape may delay exit.
const shutdownTimeout = 2 * time.Second

// Serve serves handler at /metrics on ln until ctx is done, then shuts down
// and returns nil. It returns an error only if serving fails first. ln is
// closed either way.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "gpuguard: metrics at /metrics")
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	<-errc // http.ErrServerClosed once Serve has returned
	return err
}
