package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// Queue is the deferred-task queue as the front door sees it
// (serve.Queue): deferring goes through the supervisor, which journals
// and counts it; a lookup reads the store itself, so that with a Redis
// store any host answers a status URL.
// Both fields are set once the supervisor exists, before the door serves.
type Queue struct {
	Sup   Deferrer
	Store tasks.Store
}

// Deferrer is the supervisor's side of deferring a request.
type Deferrer interface {
	DeferRequest(ctx context.Context, payload json.RawMessage, body io.Reader) (string, error)
}

func (q *Queue) Defer(ctx context.Context, payload json.RawMessage, body io.Reader) (string, error) {
	return q.Sup.DeferRequest(ctx, payload, body)
}

// ResultBody reads a done request's response body from the store itself,
// as Lookup does.
func (q *Queue) ResultBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	return q.Store.ResultBody(ctx, ticket)
}

func (q *Queue) Lookup(ctx context.Context, ticket string) (api.Task, []byte, bool, error) {
	t, result, err := q.Store.Get(ctx, ticket)
	if errors.Is(err, tasks.ErrUnknown) {
		return api.Task{}, nil, false, nil
	}
	if err != nil {
		return api.Task{}, nil, false, err
	}
	return t, result, true, nil
}
