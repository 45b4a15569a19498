package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// poll checks the health of launch gen until ctx ends: every pollStarting
// while the child is not ready, every pollReady once it is. kick asks for
// a check now (a request found the child's connection refused).
func (d *Door) poll(ctx context.Context, gen int, kick <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-t.C:
		}
		url := d.cfg.Load().Upstream + d.cfg.Load().Health
		cctx, cancel := context.WithTimeout(ctx, pollTimeout)
		err := d.check(cctx, url)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ready, first := d.healthResult(gen, err == nil)
		if first && d.opts.OnHealthy != nil {
			d.opts.OnHealthy(gen)
		}
		next := pollStarting
		if ready {
			next = pollReady
		}
		t.Reset(next)
	}
}

// healthResult applies one health answer of launch gen: the first 2xx
// opens the gate (first reports that it was the launch's first), and
// failLimit failures in a row close it. A result for a launch that is no
// longer polled (the child exited, a drain began) changes nothing.
func (d *Door) healthResult(gen int, ok bool) (ready, first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.gen || d.stopPoll == nil {
		return false, false
	}
	if ok {
		d.fails = 0
		if !d.ready.Load() {
			d.ready.Store(true)
			d.gate.setOpen(true)
		}
		first = !d.healthy
		d.healthy = true
		return true, first
	}
	d.fails++
	if d.ready.Load() && d.fails >= failLimit {
		d.logf("the child failed %d health checks in a row: holding requests until it answers again", d.fails)
		d.ready.Store(false)
		d.gate.setOpen(false)
	}
	return d.ready.Load(), false
}

// httpCheck is the health request: GET url, any 2xx is healthy. The body
// is read (bounded) so the connection can be reused.
func httpCheck(client *http.Client) func(ctx context.Context, url string) error {
	return func(ctx context.Context, url string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("health check %s: status %d", url, resp.StatusCode)
		}
		return nil
	}
}
