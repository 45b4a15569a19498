package cmd

import (
	"context"

	"github.com/gpuguard/gpuguard/internal/actions"
	"github.com/gpuguard/gpuguard/supervisor"
)

// actionCaller is the supervisor's Actions, made of package actions'
// HTTP caller: it only translates the supervisor's types to the caller's.
type actionCaller struct{ c *actions.Caller }

func newActionCaller() supervisor.Actions { return actionCaller{c: actions.New()} }

func (a actionCaller) Call(ctx context.Context, c supervisor.ActionCall) supervisor.ActionResult {
	o := a.c.Do(ctx, actions.Request{Method: c.Method, URL: c.URL, Body: c.Body, ContentType: c.ContentType,
		Header: c.Headers, Timeout: c.Timeout, Accept: c.Accept,
		Until: actions.Until{URL: c.UntilURL, Status: c.UntilStatus, Body: c.UntilBody, Timeout: c.UntilTimeout}})
	return supervisor.ActionResult{Status: o.Status, Err: o.Err, Took: o.Took}
}
