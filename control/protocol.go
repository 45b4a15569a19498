package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/jsonline"
)

// MaxLineBytes is the longest request line the server reads, not counting
// the newline. A longer line gets an error reply and the connection is
// closed, because the rest of the line cannot be told from the next request.
const MaxLineBytes = 64 << 10

// Request types.
const (
	TypeStatus    = "status"
	TypeSubscribe = "subscribe"
	TypeOOM       = "oom"
	TypeReserve   = "reserve"
	TypeRelease   = "release"
	TypeStep      = "step"
)

// Step directions.
const (
	StepDown = "down"
	StepUp   = "up"
)

// EventProfile is the "type" of the events sent to subscribers.
const EventProfile = "profile"

// request is one decoded, validated request line.
type request struct {
	ID        json.RawMessage // echoed verbatim (compacted); nil when absent
	Type      string
	Detail    string            // oom
	Reserve   admission.Request // reserve
	Lease     string            // release
	Direction string            // step
	// Payload makes a reserve a deferrable task; Tasks asks subscribe for
	// task deliveries; Ticket names the task of done and failed (whose
	// error is in Detail). See tasks.go.
	Payload json.RawMessage
	Tasks   bool
	Ticket  string
	Note    api.Event // task_note
	// TenantStep and TenantDecision are the internal shared-GPU requests.
	TenantStep     api.TenantStep
	TenantDecision api.TenantDecision
	TenantSleep    api.TenantSleep
}

// decodeRequest parses and validates one line. Whenever the line is a JSON
// object the returned request carries its id, even with an error, so the
// error reply can echo it. Unknown fields are ignored so that older servers
// accept requests from newer clients.
func decodeRequest(line []byte) (request, error) {
	var req request
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return req, fmt.Errorf("malformed request: want one JSON object a line")
	}
	if id, ok := fields["id"]; ok {
		req.ID = id
	}
	typ, ok, err := stringField(fields, "type")
	switch {
	case err != nil:
		return req, err
	case !ok:
		return req, fmt.Errorf(`missing "type"`)
	}
	req.Type = typ
	if handled, err := decodeTasks(typ, fields, &req); handled {
		return req, err
	}
	switch typ {
	case TypeStatus, TypeReload:
		return req, nil
	case TypeOOM:
		req.Detail, _, err = stringField(fields, "detail")
		return req, err
	case TypeReserve:
		req.Reserve, err = decodeReserve(fields)
		if err == nil {
			req.Payload, err = decodePayload(fields)
		}
		return req, err
	case TypeRelease:
		req.Lease, ok, err = stringField(fields, "lease")
		if err == nil && (!ok || req.Lease == "") {
			err = fmt.Errorf(`release: "lease" is required`)
		}
		return req, err
	case TypeStep:
		req.Direction, _, err = stringField(fields, "direction")
		if err == nil && req.Direction != StepDown && req.Direction != StepUp {
			err = fmt.Errorf(`step: "direction" must be "down" or "up"`)
		}
		return req, err
	}
	if handled, err := decodeTenant(typ, line, &req); handled {
		return req, err
	}
	return req, fmt.Errorf("unknown request type %q (want status, subscribe, oom, reserve, release, step, reload, ready, done or failed)", typ)
}

// decodeReserve applies the protocol's defaults (priority P1, ttl 60s).
func decodeReserve(fields map[string]json.RawMessage) (admission.Request, error) {
	r := admission.Request{Priority: admission.P1, TTL: admission.DefaultTTL}
	raw, ok := fields["bytes"]
	if !ok {
		return r, fmt.Errorf(`reserve: "bytes" is required`)
	}
	n, err := parseBytes(raw)
	if err != nil {
		return r, fmt.Errorf(`reserve: "bytes": %w`, err)
	}
	r.Bytes = n
	if p, ok, err := stringField(fields, "priority"); err != nil {
		return r, err
	} else if ok {
		if !admission.ValidPriority(p) {
			return r, fmt.Errorf(`reserve: "priority" %q: want "P0", "P1" or "P2"`, p)
		}
		r.Priority = p
	}
	if r.Tool, _, err = stringField(fields, "tool"); err != nil {
		return r, err
	}
	if len(r.Tool) > admission.MaxToolBytes {
		return r, fmt.Errorf(`reserve: "tool" is %d bytes, at most %d`, len(r.Tool), admission.MaxToolBytes)
	}
	if s, ok, err := stringField(fields, "ttl"); err != nil {
		return r, err
	} else if ok {
		if r.TTL, err = parseTTL(s); err != nil {
			return r, err
		}
	}
	return r, nil
}

// parseTTL reads a reservation's ttl: a positive Go duration of at most
// admission.MaxTTL. One too long for a Go duration ("10000000h") is too
// long, not malformed.
func parseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	var tooLong bool
	if err != nil {
		// ParseDuration fails on overflow; a longer positive figure still
		// parses as a float of hours.
		tooLong = overflowsDuration(s)
	}
	switch {
	case tooLong || err == nil && d > admission.MaxTTL:
		return 0, fmt.Errorf(`reserve: "ttl" %q: at most %v`, abbrev(s), admission.MaxTTL)
	case err != nil || d <= 0:
		return 0, fmt.Errorf(`reserve: "ttl" %q: want a positive Go duration such as "60s"`, abbrev(s))
	}
	return d, nil
}

// durationSyntax is Go's duration syntax, positive. ParseDuration refuses
// a string of this form only when it overflows.
var durationSyntax = regexp.MustCompile(`^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// overflowsDuration reports whether s is a well-formed positive Go
// duration too large for a time.Duration.
func overflowsDuration(s string) bool { return durationSyntax.MatchString(s) }

// parseBytes accepts a JSON number that is a whole number of bytes > 0.
// Whole floats (1e9, 1073741824.0) are accepted because that is what
// clients in languages without integers send.
func parseBytes(raw json.RawMessage) (uint64, error) {
	s := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || strings.HasPrefix(s, `"`) || f != math.Trunc(f) || f < 0 || f >= math.MaxUint64 {
			return 0, fmt.Errorf("want a whole number of bytes, got %s", abbrev(s))
		}
		n = uint64(f)
	}
	if n == 0 {
		return 0, fmt.Errorf("must be > 0")
	}
	return n, nil
}

// stringField reads an optional string field; a present non-string (null
// included) is an error.
func stringField(fields map[string]json.RawMessage, key string) (string, bool, error) {
	raw, ok := fields[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || json.Unmarshal(raw, &s) != nil {
		return "", true, fmt.Errorf("%q must be a string, got %s", key, abbrev(string(raw)))
	}
	return s, true, nil
}

// abbrev keeps error replies short whatever the client sent.
func abbrev(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Replies. Every reply has "ok" and, when the request had one, "id".

type okReply struct {
	OK bool            `json:"ok"`
	ID json.RawMessage `json:"id,omitempty"`
}

type errorReply struct {
	OK    bool            `json:"ok"`
	ID    json.RawMessage `json:"id,omitempty"`
	Error string          `json:"error"`
}

// statusReply puts the status object's fields at the top level, beside ok
// and id, so the reply is the status object as `status --json` shows it.
type statusReply struct {
	OK bool            `json:"ok"`
	ID json.RawMessage `json:"id,omitempty"`
	api.Status
}

type reserveReply struct {
	OK       bool            `json:"ok"`
	ID       json.RawMessage `json:"id,omitempty"`
	Decision string          `json:"decision"`
	Lease    string          `json:"lease"` // "" unless decision is gpu
	Reason   string          `json:"reason"`
}

type stepReply struct {
	OK      bool            `json:"ok"`
	ID      json.RawMessage `json:"id,omitempty"`
	Profile string          `json:"profile"`
}

// encodeLine marshals v as one line. The reply types cannot fail to
// marshal except for an id that is not valid JSON, which decodeRequest
// never produces; the fallback keeps the connection's framing intact.
func encodeLine(v any) []byte {
	b, err := jsonline.Marshal(v) // "watermark 0.93 > 0.90" stays readable in socat
	if err != nil {
		return []byte(`{"ok":false,"error":"internal error: cannot encode reply"}` + "\n")
	}
	return append(b, '\n')
}

func errorLine(id json.RawMessage, err error) []byte {
	return encodeLine(errorReply{ID: id, Error: err.Error()})
}
