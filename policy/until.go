package policy

import (
	"slices"
	"time"
)

// Until is an action's wait for the server's own word that the work is
// done: after the call succeeded, GET Path every 250 ms until the answer's
// status is in Status and its body contains Body; none such within Timeout
// fails the action. Servers whose admin call answers before the work is
// done need it: llama-server's router answers an unload while the model's
// process still runs, Ollama answers its unload before the memory is free,
// and vLLM's /is_sleeping says when a sleep is done.
type Until struct {
	Path    string        // relative to [serve] upstream, with its query; "": no wait
	Status  []int         // default [200]
	Body    string        // "": any body
	Timeout time.Duration // default DefaultUntilTimeout
}

// DefaultUntilTimeout is an until's timeout when the file gives none: a
// model loads from disk in seconds to minutes.
const DefaultUntilTimeout = 120 * time.Second

// maxStatuses bounds an accept or until.status list.
const maxStatuses = 16

// Set reports whether the action waits for anything.
func (u Until) Set() bool { return u.Path != "" }

func (u Until) equal(o Until) bool {
	return u.Path == o.Path && slices.Equal(u.Status, o.Status) && u.Body == o.Body && u.Timeout == o.Timeout
}

// until reads an action's until table; its path is required.
func (d *decoder) until(p path, v any) (Until, bool) {
	u := Until{Status: []int{200}, Timeout: DefaultUntilTimeout}
	ok := d.pathTable(p, v, `{ path = "/is_sleeping", body = "true" }`, []field{
		{"path", set(&u.Path, d.val.actionPath)},
		{"status", set(&u.Status, d.val.statusList)},
		{"body", set(&u.Body, d.val.str)},
		{"timeout", set(&u.Timeout, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, time.Millisecond) })},
	}, `the GET that tells when the work is done, such as "/is_sleeping"`)
	if len(u.Status) == 0 { // only a status = [] that read well empties the default
		d.out.errorf(p.key("status"), "must list at least one status, such as [200]")
		ok = false
	}
	return u, ok
}

// statusList reads a list of HTTP statuses (100 to 599), at most
// maxStatuses of them.
func (r reader) statusList(p path, v any) ([]int, bool) {
	elems, ok := r.array(p, v)
	if !ok {
		return nil, false
	}
	if len(elems) > maxStatuses {
		r.out.errorf(p, "%d statuses; at most %d", len(elems), maxStatuses)
		return nil, false
	}
	return listOf(r, p, v, func(p path, v any) (int, bool) {
		n, ok := v.(int64)
		if !ok {
			r.out.errorf(p, "must be an HTTP status such as 400, got %s", describe(v))
			return 0, false
		}
		if n < 100 || n > 599 {
			r.out.errorf(p, "must be an HTTP status from 100 to 599, got %d", n)
			return 0, false
		}
		return int(n), true
	})
}
