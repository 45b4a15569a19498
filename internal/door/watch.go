package door

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
)

// The watcher's cadence: a round every WatchEvery, each instance given
// QueryTimeout to answer. An instance started or stopped is seen within a
// round and its answer, and no view is older than the two together (2 s,
// the contract's bound).
const (
	WatchEvery   = 500 * time.Millisecond
	QueryTimeout = time.Second
)

// QueryFunc asks the instance behind a control socket for its status.
type QueryFunc func(ctx context.Context, socket string) (api.Status, error)

// Watcher keeps the routing table of the instances whose control sockets
// are in the runtime dirs, asking each for its status every round, as
// `gpuguard status` finds them.
type Watcher struct {
	dirs    []string
	query   QueryFunc
	timeout time.Duration // QueryTimeout; shorter in tests
	logf    func(format string, args ...any)
	table   atomic.Pointer[Table]

	mu     sync.Mutex       // one round at a time
	last   map[string]Found // by socket: each instance's last answer
	warned string           // the last listing error logged
	conns  *conns           // kept control connections (query nil only)
}

// NewWatcher watches dirs; query nil asks over the control sockets, on a
// connection kept to each instance.
func NewWatcher(dirs []string, query QueryFunc, logf func(format string, args ...any)) *Watcher {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	w := &Watcher{dirs: dirs, query: query, timeout: QueryTimeout, logf: logf, last: map[string]Found{}}
	if query == nil {
		w.conns = &conns{by: map[string]*control.Client{}}
		w.query = w.conns.status
	}
	w.table.Store(Build(nil, nil))
	return w
}

// Table is the current routing table.
func (w *Watcher) Table() *Table { return w.table.Load() }

// Run refreshes the table every WatchEvery until ctx ends, then closes
// the kept connections.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	if w.conns != nil {
		defer w.conns.keepOnly(nil)
	}
	for {
		w.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh is one round: list the sockets, ask every instance at once, and
// make the new table. An instance whose socket is gone or refuses
// connections has stopped and leaves the table; one that does not answer
// within QueryTimeout stays with its last status, as unreachable, so that
// its models get 503 rather than 404.
func (w *Watcher) Refresh(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ins, err := control.Discover(w.dirs)
	if msg := errString(err); msg != w.warned {
		w.warned = msg
		if msg != "" {
			w.logf("warning: %s", msg)
		}
	}
	if w.conns != nil {
		listed := make(map[string]bool, len(ins))
		for _, in := range ins {
			listed[in.Socket] = true
		}
		w.conns.keepOnly(listed)
	}
	answers := make([]answer, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, w.timeout)
			defer cancel()
			st, err := w.query(qctx, in.Socket)
			answers[i] = answer{socket: in.Socket, status: st, err: err, at: time.Now()}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	next := make(map[string]Found, len(answers))
	for _, a := range answers {
		if f, ok := w.judge(a); ok {
			next[a.socket] = f
		}
	}
	w.logChanges(next)
	w.last = next
	found := make([]Found, 0, len(next))
	for _, f := range next {
		found = append(found, f)
	}
	w.table.Store(Build(w.table.Load(), found))
}

// answer is one instance's reply to a round.
type answer struct {
	socket string
	status api.Status
	err    error
	at     time.Time
}

// judge turns an answer into what the table knows of the instance, and
// false when the instance is gone.
func (w *Watcher) judge(a answer) (Found, bool) {
	if a.err == nil {
		return Found{Socket: a.socket, Status: a.status, At: a.at}, true
	}
	if errors.Is(a.err, syscall.ECONNREFUSED) || errors.Is(a.err, fs.ErrNotExist) {
		return Found{}, false // stopped: its socket is stale or gone
	}
	prev, ok := w.last[a.socket]
	if !ok {
		return Found{}, false // never answered: its names are not known
	}
	prev.Status.State = api.StateUnreachable
	prev.Status.Ready = false
	prev.Status.Error = fmt.Sprintf("no answer within %v: %v", w.timeout, a.err)
	return prev, true
}

// logChanges says which instances came, went, changed their names, or
// stopped answering.
func (w *Watcher) logChanges(next map[string]Found) {
	for s, f := range next {
		prev, had := w.last[s]
		routes := routing(f.Status)
		switch {
		case had && f.Status.State == api.StateUnreachable && prev.Status.State != api.StateUnreachable:
			w.logf("instance %q does not answer on %s: %s", f.Status.Name, s, f.Status.Error)
		case had && f.Status.State != api.StateUnreachable && prev.Status.State == api.StateUnreachable:
			w.logf("instance %q answers again", f.Status.Name)
		}
		if routes != "" && (!had || routes != routing(prev.Status)) {
			w.logf("routing %s", routes)
		}
	}
	for s, f := range w.last {
		if _, ok := next[s]; !ok && f.Status.Serve != "" {
			w.logf("instance %q is gone: no longer routing %s", f.Status.Name, strings.Join(modelsOf(f.Status), ", "))
		}
	}
}

// routing describes what the door routes to an instance ("" without a
// front door).
func routing(st api.Status) string {
	if st.Serve == "" {
		return ""
	}
	return fmt.Sprintf("%s to instance %q (front door %s)", strings.Join(modelsOf(st), ", "), st.Name, st.Serve)
}

func modelsOf(st api.Status) []string {
	if len(st.Models) == 0 {
		return []string{st.Name}
	}
	return st.Models
}

// conns keeps one control connection per instance from round to round:
// a status request then costs each side a write and a read, not a
// connection (the control server keeps an idle connection open).
type conns struct {
	mu sync.Mutex
	by map[string]*control.Client // by socket
}

// status asks the instance behind socket for its status, on its kept
// connection; a kept connection that fails (the instance restarted, or
// closed it) is replaced once, in the same call, so that a restart is not
// taken for a hang.
func (c *conns) status(ctx context.Context, socket string) (api.Status, error) {
	c.mu.Lock()
	cl := c.by[socket]
	c.mu.Unlock()
	if cl != nil {
		st, err := cl.Status(ctx)
		if err == nil {
			return st, nil
		}
		c.drop(socket, cl)
		if ctx.Err() != nil {
			return api.Status{}, err
		}
	}
	cl, err := control.Dial(ctx, socket)
	if err != nil {
		return api.Status{}, err
	}
	st, err := cl.Status(ctx)
	if err != nil {
		cl.Close()
		return api.Status{}, err
	}
	c.mu.Lock()
	if old := c.by[socket]; old != nil {
		old.Close()
	}
	c.by[socket] = cl
	c.mu.Unlock()
	return st, nil
}

func (c *conns) drop(socket string, cl *control.Client) {
	cl.Close()
	c.mu.Lock()
	if c.by[socket] == cl {
		delete(c.by, socket)
	}
	c.mu.Unlock()
}

// keepOnly closes the connections to sockets no longer listed.
func (c *conns) keepOnly(listed map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, cl := range c.by {
		if !listed[s] {
			cl.Close()
			delete(c.by, s)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
