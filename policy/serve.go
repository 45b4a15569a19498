package policy

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// Serve is the [serve] section: the front door that listens for the
// child's clients and passes their requests to it (docs/serving.md).
type Serve struct {
	Listen   string        // HOST:PORT clients connect to; "" = no front door
	Upstream string        // the child's own base URL (http://HOST:PORT[/prefix])
	Health   string        // GET path on Upstream; a 2xx means ready
	Hold     time.Duration // how long a request may wait for a ready child
	MaxHeld  int           // requests waiting at once; one more gets 503 at once
	Retry    bool          // resend, once, a request the child dropped before any byte
	Fallback string        // base URL of a CPU-only server for P1 while memory is short
	Priority string        // P0 | P1 | P2: requests without X-GPUGuard-Priority
	Wake     bool          // a request while asleep steps up (server actions)
	Idle     time.Duration // > 0: no request for this long steps down to sleep (server actions)
	// MakeRoom: a wake, start or restart that does not fit may put idle
	// peers of its GPU to sleep (docs/sharing.md, Making room).
	MakeRoom bool
	// KeepAwake: this instance is not put to sleep for a peer within this
	// long of its last answer or wake.
	KeepAwake time.Duration
	// Models are the names this instance answers to at `gpuguard door`,
	// the first being the one its server knows; empty: the instance's
	// name (ModelNames).
	Models []string
}

// ModelNames are the names the instance answers to at `gpuguard door`:
// [serve] models, else the instance's own name.
func (s Serve) ModelNames(instance string) []string {
	if len(s.Models) > 0 {
		return s.Models
	}
	return []string{instance}
}

// Equal reports whether s and o are the same settings (Models makes
// Serve incomparable with ==).
func (s Serve) Equal(o Serve) bool { return reflect.DeepEqual(s, o) }

// MaxModels and MaxModelName bound [serve] models: every name is a row of
// the door's listings and a value its metrics may carry.
const (
	MaxModels    = 64
	MaxModelName = 256
)

// Enabled reports whether the front door runs.
func (s Serve) Enabled() bool { return s.Listen != "" }

// Request priorities of [serve] priority and X-GPUGuard-Priority.
const (
	PriorityP0 = "P0"
	PriorityP1 = "P1"
	PriorityP2 = "P2"
)

// DefaultKeepAwake is [serve] keep_awake's default: long enough that two
// models taking turns on one GPU serve a burst each between swaps.
const DefaultKeepAwake = 60 * time.Second

// MaxHeld bounds [serve] max_held: each held request costs a goroutine
// and its connection's buffers.
const MaxHeld = 1_000_000

func defaultServe() Serve {
	return Serve{Health: "/health", Hold: 120 * time.Second, MaxHeld: 1000, Retry: true,
		Priority: PriorityP0, Wake: true, MakeRoom: true, KeepAwake: DefaultKeepAwake}
}

func (d *decoder) serveFields(s *Serve) []field {
	nonNeg := func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, 0) }
	return []field{
		{"listen", set(&s.Listen, d.val.listenAddr)},
		{"upstream", set(&s.Upstream, func(p path, v any) (string, bool) { return d.val.httpURL(p, v, "upstream") })},
		{"health", set(&s.Health, func(p path, v any) (string, bool) {
			h, ok := d.val.str(p, v)
			if ok && (!strings.HasPrefix(h, "/") || strings.ContainsAny(h, " \t\r\n#")) {
				d.out.errorf(p, "must be a path on upstream starting with \"/\", such as \"/health\" (Ollama: \"/\"), got %q", h)
				return "", false
			}
			return h, ok
		})},
		{"hold", set(&s.Hold, nonNeg)},
		{"max_held", set(&s.MaxHeld, func(p path, v any) (int, bool) {
			n, ok := d.val.integer(p, v, 0, MaxHeld)
			return int(n), ok
		})},
		{"retry", set(&s.Retry, d.val.boolean)},
		{"fallback", set(&s.Fallback, func(p path, v any) (string, bool) { return d.val.httpURL(p, v, "fallback") })},
		{"priority", set(&s.Priority, func(p path, v any) (string, bool) {
			return d.val.enum(p, v, PriorityP0, PriorityP1, PriorityP2)
		})},
		{"wake", set(&s.Wake, d.val.boolean)},
		{"idle", set(&s.Idle, nonNeg)},
		{"make_room", set(&s.MakeRoom, d.val.boolean)},
		{"keep_awake", set(&s.KeepAwake, nonNeg)},
		{"models", set(&s.Models, d.val.modelNames)},
	}
}

// modelNames reads [serve] models: distinct, printable names with no
// surrounding space, as clients send them in a request's "model".
func (r reader) modelNames(p path, v any) ([]string, bool) {
	names, ok := r.stringList(p, v)
	if !ok || len(names) == 0 {
		return nil, ok
	}
	if len(names) > MaxModels {
		r.out.errorf(p, "%d names; at most %d are allowed", len(names), MaxModels)
		return nil, false
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		switch {
		case n == "" || len(n) > MaxModelName:
			r.out.errorf(p.index(i), "must be 1 to %d bytes long, got %d", MaxModelName, len(n))
		case strings.TrimSpace(n) != n || strings.ContainsFunc(n, func(c rune) bool { return !unicode.IsPrint(c) }):
			r.out.errorf(p.index(i), "%q: a model name has no control characters and no space around it", n)
		case seen[n]:
			r.out.errorf(p.index(i), "%q is listed twice", n)
		default:
			seen[n] = true
			continue
		}
		return nil, false
	}
	return names, true
}

// httpURL reads "" or an http:// base URL with a host and no query or
// fragment (paths are appended to it).
func (r reader) httpURL(p path, v any, what string) (string, bool) {
	s, ok := r.str(p, v)
	if !ok || s == "" {
		return s, ok
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		r.out.errorf(p, "must be an http:// URL such as \"http://127.0.0.1:8001\", got %q: %v", s, err)
	case u.Scheme != "http":
		r.out.errorf(p, "must be an http:// URL such as \"http://127.0.0.1:8001\" (the %s is a local server; https is not supported), got %q", what, s)
	case u.Host == "" || u.Hostname() == "":
		r.out.errorf(p, "must name a host, such as \"http://127.0.0.1:8001\", got %q", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		r.out.errorf(p, "must be a base URL without user, query or fragment, got %q", s)
	default:
		return strings.TrimRight(s, "/"), true
	}
	return "", false
}

// validateServe checks the rules that tie [serve]'s keys together.
func (c crossKeys) validateServe(pol *Policy, raw map[string]any) {
	sp := path{"serve"}
	s := pol.Serve
	if s.Listen != "" && s.Upstream == "" && c.out.usable(sp.key("listen"), sp.key("upstream")) {
		c.out.errorf(sp.key("listen"), "needs serve.upstream, the child's own base URL such as \"http://127.0.0.1:8001\"")
	}
	if s.Listen != "" && s.Upstream != "" && c.out.usable(sp.key("listen"), sp.key("upstream")) && sameHostPort(s.Listen, s.Upstream) {
		c.out.errorf(sp.key("upstream"), "is the front door's own address (serve.listen = %q): the child must listen elsewhere", s.Listen)
	}
}

// sameHostPort reports whether the base URL u points at listen itself.
func sameHostPort(listen, u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	port := pu.Port()
	if port == "" {
		port = "80"
	}
	host := pu.Hostname()
	lh, lp, _ := strings.Cut(listen, ":")
	if i := strings.LastIndex(listen, ":"); i >= 0 {
		lh, lp = strings.Trim(listen[:i], "[]"), listen[i+1:]
	}
	return lp == port && (lh == host || lh == "" || lh == "0.0.0.0" || lh == "::")
}

// describeServe is `policy check`'s line for [serve].
func describeServe(s Serve) string {
	if !s.Enabled() {
		return "disabled"
	}
	fb := s.Fallback
	if fb == "" {
		fb = "none"
	}
	models := "(the instance's name)"
	if len(s.Models) > 0 {
		models = strings.Join(s.Models, ",")
	}
	return fmt.Sprintf("listen=%s upstream=%s health=%s hold=%s max_held=%d retry=%v fallback=%s priority=%s models=%s",
		s.Listen, s.Upstream, s.Health, fmtDuration(s.Hold), s.MaxHeld, s.Retry, fb, s.Priority, models)
}
