package supervisor

import (
	"context"
)

// loopPort is how a caller off the loop hands it a request and waits for
// the reply: the Supervisor's own methods, the admission and the task
// API each hold one, so none of them needs the whole Supervisor to talk
// to the loop. done is closed when Run returns.
type loopPort struct {
	reqs chan<- request
	done <-chan struct{}
}

func (p loopPort) call(ctx context.Context, r request) (response, error) {
	r.reply = make(chan response, 1)
	if err := p.send(ctx, r); err != nil {
		return response{}, err
	}
	return p.await(ctx, r)
}

// send hands r to the loop; an error means the loop never got it.
func (p loopPort) send(ctx context.Context, r request) error {
	select {
	case p.reqs <- r:
		return nil
	case <-p.done:
		return errShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits for the loop's reply to r, which send handed over.
func (p loopPort) await(ctx context.Context, r request) (response, error) {
	select {
	case resp := <-r.reply:
		return resp, resp.err
	case <-p.done:
		return response{}, errShutdown
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
}
