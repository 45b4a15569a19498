package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Action is one HTTP call a profile makes to [serve] upstream when it is
// entered or left live: the server's own admin API (vLLM's /sleep, SGLang's
// release_memory_occupation, Ollama's unload). See docs/serving.md.
type Action struct {
	Method  string            // default POST
	Path    string            // relative to [serve] upstream, with its query
	Body    string            // "" = none
	Headers map[string]string // extra request headers
	Timeout time.Duration     // default DefaultActionTimeout
	Accept  []int             // statuses counted as success besides any 2xx
	Until   Until             // the server's own word that the work is done; zero: none
}

// DefaultActionTimeout is an action's timeout when the file gives none: a
// vLLM sleep with mode=wait drains first, and a wake reloads weights from
// CPU memory, which takes seconds.
const DefaultActionTimeout = 60 * time.Second

// MaxActions bounds a profile's enter or leave list.
const MaxActions = 16

// ContentType is the Content-Type a's body is sent with: JSON when the
// body parses as JSON, else plain text ("" when there is no body).
func (a Action) ContentType() string {
	switch {
	case a.Body == "":
		return ""
	case json.Valid([]byte(a.Body)):
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

// Serving reports whether the server answers requests in this profile
// (serving = true, the default).
func (p Profile) Serving() bool { return !p.NotServing }

// actionList reads a profile's enter or leave list.
func (d *decoder) actionList(p path, v any) ([]Action, bool) {
	elems, ok := d.val.array(p, v)
	if !ok {
		return nil, false
	}
	if len(elems) > MaxActions {
		d.out.errorf(p, "%d actions; a profile may have at most %d", len(elems), MaxActions)
		return nil, false
	}
	out := make([]Action, 0, len(elems))
	good := true
	for i, e := range elems {
		a := Action{Method: "POST", Timeout: DefaultActionTimeout, Headers: map[string]string{}}
		if !d.pathTable(p.index(i), e, `{ method = "POST", path = "/sleep?level=1" }`, d.actionFields(&a), `such as "/sleep?level=1"`) {
			good = false
			continue
		}
		out = append(out, a)
	}
	return out, good
}

// pathTable decodes v at p, a table such as example, with fields, and
// reports a table that has no path (its hint says what the path is). It
// answers whether v decoded with no error.
func (d *decoder) pathTable(p path, v any, example string, fields []field, hint string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		d.out.errorf(p, "must be a table such as %s, got %s", example, describe(v))
		return false
	}
	before := len(d.out.errs)
	d.table(p, m, fields, nil)
	if _, has := m["path"]; !has {
		d.out.errorf(p, "missing path, %s", hint)
	}
	return len(d.out.errs) == before
}

func (d *decoder) actionFields(a *Action) []field {
	return []field{
		{"method", set(&a.Method, d.val.httpMethod)},
		{"path", set(&a.Path, d.val.actionPath)},
		{"body", set(&a.Body, d.val.str)},
		{"headers", func(p path, v any) { d.headers(a, p, v) }},
		{"timeout", set(&a.Timeout, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, time.Millisecond) })},
		{"accept", set(&a.Accept, d.val.statusList)},
		{"until", set(&a.Until, d.until)},
	}
}

// httpMethod reads an HTTP method: an upper-case token such as "POST".
func (r reader) httpMethod(p path, v any) (string, bool) {
	s, ok := r.str(p, v)
	if !ok {
		return "", false
	}
	if s == "" || strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		r.out.errorf(p, "must be an HTTP method in capitals such as \"POST\" or \"GET\", got %q", s)
		return "", false
	}
	return s, true
}

// actionPath reads a path with an optional query, relative to upstream.
func (r reader) actionPath(p path, v any) (string, bool) {
	s, ok := r.str(p, v)
	if !ok {
		return "", false
	}
	u, err := url.ParseRequestURI(s)
	if err != nil || !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || u.Host != "" || u.Fragment != "" ||
		strings.ContainsAny(s, " \t\r\n#") {
		r.out.errorf(p, "must be a path on serve.upstream starting with \"/\", with its query, such as \"/sleep?level=1&mode=wait\", got %q", s)
		return "", false
	}
	return s, true
}

// headers reads an action's header table.
func (d *decoder) headers(a *Action, p path, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		d.out.errorf(p, "must be a table such as { Authorization = \"Bearer ...\" }, got %s", describe(v))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kp := p.key(k)
		if !validToken(k) {
			d.out.errorf(kp, "invalid header name %q", k)
			continue
		}
		s, ok := d.val.str(kp, m[k])
		if !ok {
			continue
		}
		if strings.ContainsAny(s, "\r\n") {
			d.out.errorf(kp, "must not contain a line break")
			continue
		}
		a.Headers[k] = s
	}
}

// validToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validateActions checks the rules that tie actions and serving = false to
// the rest: actions need live = true and [serve] upstream, and every
// serving = false profile comes after every serving one (a step down
// never wakes the server).
func (c crossKeys) validateActions(pol *Policy, raw map[string]any) {
	asleep := -1
	for i, prof := range pol.Profiles {
		pp := path{"profile"}.index(i)
		for _, k := range []string{"enter", "leave"} {
			acts := prof.Enter
			if k == "leave" {
				acts = prof.Leave
			}
			kp := pp.key(k)
			switch {
			case len(acts) == 0 || !c.out.usable(kp):
			case !prof.Live && c.out.usable(pp.key("live")):
				c.out.errorf(kp, "needs live = true in profile %q: actions run only on a live change (without them, serving = false stops the child)", prof.Name)
			case pol.Serve.Upstream == "" && c.out.usable(path{"serve", "upstream"}):
				c.out.errorf(kp, "needs serve.upstream, the server's own base URL the actions are sent to, such as \"http://127.0.0.1:8001\"")
			}
		}
		switch {
		case !prof.Serving() && asleep < 0:
			asleep = i
		case prof.Serving() && asleep >= 0 && c.out.usable(pp.key("serving")):
			c.out.errorf(pp, "profile %q serves requests but comes after profile %q (serving = false): every serving = false profile must come after every serving one",
				prof.Name, pol.Profiles[asleep].Name)
		}
	}
}

// sameActions compares two action lists.
func sameActions(a, b []Action) bool {
	return slices.EqualFunc(a, b, func(x, y Action) bool {
		return x.Method == y.Method && x.Path == y.Path && x.Body == y.Body && x.Timeout == y.Timeout && maps.Equal(x.Headers, y.Headers) &&
			slices.Equal(x.Accept, y.Accept) && x.Until.equal(y.Until)
	})
}

// describeActions is the ladder table's column for a profile's actions.
func describeActions(prof Profile) string {
	var parts []string
	if !prof.Serving() {
		parts = append(parts, "asleep")
	}
	for _, a := range prof.Enter {
		parts = append(parts, fmt.Sprintf("enter %s %s", a.Method, a.Path))
	}
	for _, a := range prof.Leave {
		parts = append(parts, fmt.Sprintf("leave %s %s", a.Method, a.Path))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
