package cmd

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor"
	"github.com/gpuguard/gpuguard/tasks"
)

// doorQueue is the deferred-task queue as the front door sees it
// (serve.Queue): deferring goes through the supervisor, which journals
// and counts it; a lookup reads the store itself, so that with a Redis
// store any host answers a status URL.
type doorQueue struct {
	sup   *supervisor.Supervisor
	store tasks.Store
}

func (q *doorQueue) Defer(ctx context.Context, payload json.RawMessage) (string, error) {
	return q.sup.DeferRequest(ctx, payload)
}

func (q *doorQueue) Lookup(ctx context.Context, ticket string) (api.Task, []byte, bool, error) {
	t, result, err := q.store.Get(ctx, ticket)
	if errors.Is(err, tasks.ErrUnknown) {
		return api.Task{}, nil, false, nil
	}
	if err != nil {
		return api.Task{}, nil, false, err
	}
	return t, result, true, nil
}
