package sharing

import (
	"context"

	"github.com/gpuguard/gpuguard/api"
)

// roomAsker is this instance's side of making room on a shared GPU: the
// ask, taken to the coordinator off the loop (it ranks the candidates,
// asks the first to sleep and follows its sleep to the end); the answer
// comes back on RoomAnswers. When to ask and what an answer leads to are
// the decision core's (core.AskRoom, core.RoomAnswer).
type roomAsker struct {
	c   Coordinator
	out chan api.RoomOutcome
}

// MakeRoom asks the tenants of ask.GPU for room, off the loop.
func (r *roomAsker) MakeRoom(ctx context.Context, ask api.RoomAsk) {
	c := r.c
	offLoop(ctx, r.out, func() api.RoomOutcome { return c.MakeRoom(ctx, ask) })
}

// RoomAnswers is where the answers to the asks come.
func (r *roomAsker) RoomAnswers() <-chan api.RoomOutcome { return r.out }
