package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// TypeReload asks the instance to re-read and apply its policy file.
const TypeReload = "reload"

// Reloader is a Backend that can re-read its policy (`reload`). It is
// separate from Backend so that a backend without it still serves the
// rest; such a backend refuses the request.
type Reloader interface {
	// Reload re-reads and applies the instance's policy and returns the
	// keys it changed (empty, not nil, when none). A refused reload
	// changes nothing; its error unwraps to every problem found
	// (Unwrap() []error, as policy.ErrorList does), each of which the
	// reply lists in "errors".
	Reload(ctx context.Context) (changed []string, err error)
}

type reloadReply struct {
	OK      bool            `json:"ok"`
	ID      json.RawMessage `json:"id,omitempty"`
	Changed []string        `json:"changed"`
}

// reloadErrorReply is a refused reload: the usual error reply, plus Errors
// listing the problems, each naming the file, line and key. A reload that
// failed for another reason (the instance is shutting down) has no Errors.
type reloadErrorReply struct {
	errorReply
	Errors []string `json:"errors,omitempty"`
}

// handleReload answers `reload`.
func (c *conn) handleReload(ctx context.Context, b Backend, id json.RawMessage) bool {
	r, ok := b.(Reloader)
	if !ok {
		return c.write(errorLine(id, fmt.Errorf("%s: not supported by this instance", TypeReload))) == nil
	}
	changed, err := r.Reload(ctx)
	if err != nil {
		return c.write(encodeLine(reloadErrorReply{errorReply{ID: id, Error: err.Error()}, problems(err)})) == nil
	}
	if changed == nil {
		changed = []string{}
	}
	return c.write(encodeLine(reloadReply{OK: true, ID: id, Changed: changed})) == nil
}

// problems lists the errors err is made of, or nil when it is a single one
// without a list.
func problems(err error) []string {
	var list interface{ Unwrap() []error }
	if !errors.As(err, &list) {
		return nil
	}
	var out []string
	for _, e := range list.Unwrap() {
		out = append(out, e.Error())
	}
	return out
}

// Reload asks the instance to re-read its policy and returns the keys it
// changed. A refusal is a *RemoteError whose Errors list the problems
// (none when the reload failed for another reason than the policy).
func (c *Client) Reload(ctx context.Context) ([]string, error) {
	line, err := c.call(ctx, map[string]any{"type": TypeReload})
	if err != nil {
		return nil, err
	}
	var r reloadReply
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("bad reload reply from %s: %w", c.path, err)
	}
	if r.Changed == nil {
		r.Changed = []string{}
	}
	return r.Changed, nil
}
