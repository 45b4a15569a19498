package door

import (
	"encoding/json"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Found is one instance as the watcher last saw it: its socket (names are
// unique only within a runtime dir) and its status object. An instance
// that stopped answering keeps its last status with State "unreachable".
type Found struct {
	Socket string
	Status api.Status
	At     time.Time // when Status was read
}

// Backend is one instance the table routes to.
type Backend struct {
	Name   string   // the instance's name
	Socket string   // its control socket: what identifies it across tables
	Addr   string   // host:port of its front door, to dial
	Models []string // the names it answers to; Models[0] is its server's
	Status api.Status
	seen   time.Time // when Status was read
	// quoted is Models[0] as a JSON string: an alias is rewritten to it.
	quoted []byte
	// inFlight is the door's count of requests open to this instance; it
	// moves from table to table with the instance (by Socket).
	inFlight *atomic.Int64
}

// InFlight is how many requests the door has open to b now.
func (b *Backend) InFlight() int64 { return b.inFlight.Load() }

// State is the door's view of b: "ready" while its front door passes
// requests, else its status object's state (asleep, waiting, starting,
// unreachable, ...).
func (b *Backend) State() string {
	if b.Status.Ready && b.Status.State != api.StateUnreachable {
		return "ready"
	}
	return b.Status.State
}

// Unreachable reports whether b stopped answering on its socket: a
// request for it gets 503 rather than a wait on a door that may be hung.
func (b *Backend) Unreachable() bool { return b.Status.State == api.StateUnreachable }

// rank orders replicas by how soon they can answer: ready ones first, then
// those that will be ready by themselves, then a sleeping one (a wake),
// then one waiting for memory, then one on its way out, and last one that
// does not answer.
func (b *Backend) rank() int {
	if b.State() == "ready" {
		return 0
	}
	switch b.Status.State {
	case api.StateStarting, api.StateRunning, api.StateStepping, api.StateBackoff:
		return 1
	case api.StateAsleep:
		return 2
	case api.StateWaiting:
		return 3
	case api.StateUnreachable:
		return 5
	default: // stopping, exited, fatal
		return 4
	}
}

// Table is one immutable view of the host's instances: which instance
// answers to which name. Build makes a new one; requests read whichever
// is current.
type Table struct {
	backends []*Backend            // by name, then socket
	routes   map[string][]*Backend // every declared name -> its instances, in backends' order
	names    []string              // the keys of routes, sorted
}

// Build makes the table of the instances found, keeping prev's in-flight
// counts for the instances still there (prev may be nil). An instance
// without a front door (no serve address in its status) is not routed.
func Build(prev *Table, found []Found) *Table {
	counts := map[string]*atomic.Int64{}
	if prev != nil {
		for _, b := range prev.backends {
			counts[b.Socket] = b.inFlight
		}
	}
	t := &Table{routes: map[string][]*Backend{}}
	for _, f := range found {
		addr, ok := dialAddr(f.Status.Serve)
		if !ok {
			continue
		}
		models := f.Status.Models
		if len(models) == 0 {
			models = []string{f.Status.Name}
		}
		quoted, _ := json.Marshal(models[0]) // a string always encodes
		b := &Backend{Name: f.Status.Name, Socket: f.Socket, Addr: addr, Models: models, Status: f.Status,
			seen: f.At, quoted: quoted, inFlight: counts[f.Socket]}
		if b.inFlight == nil {
			b.inFlight = new(atomic.Int64)
		}
		t.backends = append(t.backends, b)
	}
	slices.SortStableFunc(t.backends, func(a, b *Backend) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Socket, b.Socket)
	})
	for _, b := range t.backends {
		for _, m := range b.Models {
			if !slices.Contains(t.routes[m], b) { // a name listed twice counts once
				t.routes[m] = append(t.routes[m], b)
			}
		}
	}
	for m := range t.routes {
		t.names = append(t.names, m)
	}
	slices.Sort(t.names)
	return t
}

// dialAddr is where to reach a front door listening on listen: a wildcard
// host (":8001", "0.0.0.0:8001", "[::]:8001") is reached on loopback.
func dialAddr(listen string) (string, bool) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return "", false
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port), true
}

// Names is every name some instance answers to, sorted.
func (t *Table) Names() []string { return t.names }

// Backends is every routed instance, by name.
func (t *Table) Backends() []*Backend { return t.backends }

// Has reports whether some instance answers to name.
func (t *Table) Has(name string) bool {
	_, ok := t.routes[name]
	return ok
}

// Replicas are the instances that answer to name, by instance name.
func (t *Table) Replicas(name string) []*Backend { return t.routes[name] }

// Pick chooses the instance for a request naming name: a ready one with
// the fewest requests in flight, else the one that will be ready first
// (rank), ties going to the instance name first in order; nil when no
// instance answers to name.
func (t *Table) Pick(name string) *Backend {
	var best *Backend
	bestRank := 0
	for _, b := range t.routes[name] {
		r := b.rank()
		switch {
		case best == nil || r < bestRank:
			best, bestRank = b, r
		case r == 0 && bestRank == 0 && b.InFlight() < best.InFlight():
			best = b
		}
	}
	return best
}

// Upstream splits the escaped path of an /upstream/MODEL/PATH request
// (escaped: as url.URL.EscapedPath gives it) into MODEL and the escaped
// /PATH to pass on. A first segment with an escaped "/" (%2F) is the name
// as written; otherwise the longest declared name that the path's leading
// segments spell wins. ok is false when no declared name matches; model is
// then the first segment, for the error.
func (t *Table) Upstream(escaped string) (model, rest string, ok bool) {
	tail := strings.TrimPrefix(escaped, UpstreamPrefix)
	segs := strings.Split(tail, "/")
	first, err := url.PathUnescape(segs[0])
	if err != nil {
		first = segs[0]
	}
	if strings.Contains(strings.ToUpper(segs[0]), "%2F") {
		return first, restPath(segs[1:]), t.Has(first)
	}
	name := ""
	for k := range segs {
		d, err := url.PathUnescape(segs[k])
		if err != nil {
			break
		}
		if k == 0 {
			name = d
		} else {
			name += "/" + d
		}
		if t.Has(name) {
			model, rest, ok = name, restPath(segs[k+1:]), true
		}
	}
	if !ok {
		return first, "", false
	}
	return model, rest, true
}

// restPath is the path after MODEL: "/" and the remaining segments.
func restPath(segs []string) string {
	return "/" + strings.Join(segs, "/")
}

// UpstreamPrefix starts the paths that name their model in the path rather
// than in a body.
const UpstreamPrefix = "/upstream/"
