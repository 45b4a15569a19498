package tenants

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
)

// Options configure a Coordinator.
type Options struct {
	// RuntimeDir is the shared runtime dir: the tenants' sockets and the
	// per-GPU directories.
	RuntimeDir string
	// Name is this instance's name (its socket is <RuntimeDir>/<Name>.sock).
	Name string
	// Logf prints one line about what happened; nil prints nothing.
	Logf func(format string, args ...any)
	// Now is the wall clock; claims carry wall-clock times because other
	// processes compare them. nil means time.Now.
	Now func() time.Time
	// PeerTimeout bounds each question to another tenant; 0 means
	// PeerTimeout.
	PeerTimeout time.Duration
}

// Coordinator is one instance's side of the agreement between the tenants
// of its GPUs. Every method may do I/O (files, other tenants' sockets) and
// is safe to call from several goroutines; the supervisor calls them off
// its loop, except Confirm, which only creates one local file.
type Coordinator struct {
	o  Options
	wg sync.WaitGroup // announcements, sweeps and collections in flight

	liveMu sync.Mutex
	live   *os.File // the flock that says this instance runs (see admit.go)

	busyMu sync.Mutex
	busy   map[string]busySpan // per GPU: another tenant has been deciding

	sweepMu  sync.Mutex
	sweeping map[string]bool      // per GPU dir: a sweep runs
	swept    map[string]time.Time // per GPU dir: when the last sweep ended

	silence silence    // tenants that did not answer in time, passed over for a while
	pub     *publisher // this instance's TenantInfo, written off the caller (publish.go)
}

// busySpan is a run of proposals that found another tenant deciding.
type busySpan struct{ since, last time.Time }

// New returns a Coordinator. Nothing is touched until it is used.
func New(o Options) *Coordinator {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PeerTimeout <= 0 {
		o.PeerTimeout = PeerTimeout
	}
	c := &Coordinator{o: o, busy: map[string]busySpan{}, sweeping: map[string]bool{}, swept: map[string]time.Time{}}
	c.pub = &publisher{runtimeDir: o.RuntimeDir, name: o.Name, write: c.publishOwn, logf: o.Logf}
	return c
}

// Close waits for the announcements still being sent (each is bounded by
// PeerTimeout), stops publishing, removes what it published and lets go of
// the live lock: this instance is no tenant any more.
func (c *Coordinator) Close() error {
	c.wg.Wait()
	last := c.pub.close()
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	if c.live == nil {
		return nil
	}
	if last != nil {
		for _, g := range last.GPUs {
			dir := filepath.Join(c.o.RuntimeDir, gpusDir, Key(g.UUID))
			os.Remove(filepath.Join(dir, infoPrefix+c.o.Name))
			os.Remove(filepath.Join(dir, leasePrefix+c.o.Name))
		}
	}
	c.live.Close()
	c.live = nil
	return nil
}

// Proposal, Outcome and its kinds are the supervisor's words (package
// api), so that it owns its Coordinator interface without importing this
// package; the names here are kept for this package's callers.
type (
	Proposal    = api.Proposal
	OutcomeKind = api.OutcomeKind
	Outcome     = api.Outcome
)

// The outcome kinds (see api.OutcomeKind).
const (
	Hold        = api.OutcomeHold
	Step        = api.OutcomeStep
	Yield       = api.OutcomeYield
	NoCandidate = api.OutcomeNoCandidate
	Failed      = api.OutcomeFailed
)

// maxAttempts bounds the claims one proposal makes: a lost race for a seq,
// or a chosen tenant that refused or did not answer, costs one.
const maxAttempts = 4

// Decide takes a proposal to the GPU's decision log: it holds while the
// cadence of the last decision runs or a decision is in flight, else it
// ranks the tenants that answered, claims the next seq for the first and
// asks it to step (the proposer itself: outcome Step). A chosen tenant
// that refuses or does not answer is passed over for the next.
func (c *Coordinator) Decide(ctx context.Context, p Proposal) Outcome {
	dir, err := GPUDir(c.o.RuntimeDir, p.GPU)
	if err != nil {
		return Outcome{Kind: Failed, Err: err}
	}
	c.maybeSweep(dir)
	// The log first: while a decision is in flight or its cadence runs,
	// the answer is Hold and no other tenant need be asked. (Every tenant
	// that sees a crossing proposes; only the first pays for discovery.)
	if entries, err := readDecisions(dir); err == nil {
		if st := Evaluate(entries, c.o.Now()); st.Hold {
			out := Outcome{Kind: Hold}
			if st.Record != nil {
				out.Record = *st.Record
			}
			return out
		}
	}
	// One decider at a time: every tenant sees the crossing at about the
	// same moment, and if each asked all the others the herd would slow
	// the decision down. A decider that holds the lock for longer than
	// ClaimTTL (hung, stopped) is ignored; the claims keep this correct.
	unlock, busy := c.decideLock(dir, p.GPU)
	if busy {
		return Outcome{Kind: Hold}
	}
	defer unlock()
	self := p.Self
	self.Name = c.o.Name
	cands := []Candidate{{TenantInfo: self, Socket: c.socket(c.o.Name)}}
	var peers []string
	for _, t := range c.tenants(dir) {
		if t.Watches(p.GPU) {
			cands = append(cands, t)
			peers = append(peers, t.Socket)
		}
	}
	ranked := Rank(p.Kind, p.GPU, cands)
	out := Outcome{Peers: peers, Shared: len(peers) > 0}
	for range maxAttempts {
		entries, err := readDecisions(dir)
		if err != nil {
			return Outcome{Kind: Failed, Err: fmt.Errorf("reading the decision log: %w", err)}
		}
		now := c.o.Now()
		st := Evaluate(entries, now)
		if st.Hold {
			out.Kind = Hold
			if st.Record != nil {
				out.Record = *st.Record
			}
			return out
		}
		if len(ranked) == 0 {
			out.Kind = NoCandidate
			return out
		}
		if !c.voidAll(dir, st.Stale) {
			continue // a stale claim was confirmed at the last moment: re-read
		}
		w := ranked[0]
		claim := Claim{Seq: st.Next, GPU: p.GPU, Kind: p.Kind, To: w.Name, By: c.o.Name, At: now.UnixNano()}
		if err := create(dir, decisionName(claim.Seq), claim); errors.Is(err, ErrTaken) {
			continue // another tenant decided at the same moment
		} else if err != nil {
			return Outcome{Kind: Failed, Err: err}
		}
		if newest(dir, decisionPrefix) != claim.Seq {
			// Our view was old enough that the seq had been collected and
			// newer decisions exist: this claim decided on stale facts.
			c.Void(p.GPU, claim.Seq)
			out.Kind = Hold
			return out
		}
		if claim.Seq%Keep == 0 {
			collect(dir, decisionPrefix, claim.Seq)
		}
		step := api.TenantStep{GPU: p.GPU, Seq: claim.Seq, Kind: p.Kind, By: c.o.Name, At: claim.At, Watermark: p.Watermark}
		if w.Name == c.o.Name {
			out.Kind, out.Claim = Step, step
			return out
		}
		d, err := c.sendStep(ctx, w.Socket, step)
		if err != nil {
			// It refused or did not answer. End the claim so that it can
			// never run late; if it was confirmed meanwhile, it did run.
			end, voided := c.end(dir, claim.Seq, End{Void: true, By: c.o.Name, At: c.o.Now().UnixNano()})
			if voided {
				if errors.Is(err, context.DeadlineExceeded) {
					c.silence.passOver(w.Name)
				}
				c.o.Logf("shared GPU %s: %s did not take the step (%v); asking the next tenant", p.GPU, w.Name, err)
				ranked = ranked[1:]
				continue
			}
			d = Entry{Seq: claim.Seq, Claim: &claim, End: end}.Decision()
		}
		c.Announce(d, without(peers, w.Socket))
		out.Kind, out.Record = Yield, d
		return out
	}
	out.Kind = Hold
	return out
}

// decideLock takes the GPU's decide.lock without waiting. busy: another
// tenant holds it, and has for less than ClaimTTL as far as this instance
// has seen. Past that the decision goes ahead without the lock (unlock is
// then a no-op).
func (c *Coordinator) decideLock(dir, gpu string) (unlock func(), busy bool) {
	f, err := openLock(filepath.Join(dir, decideLock))
	if err != nil {
		return func() {}, false
	}
	c.busyMu.Lock()
	defer c.busyMu.Unlock()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		now := c.o.Now()
		b := c.busy[gpu]
		if now.Sub(b.last) > ClaimTTL { // a new run: the last one ended
			b.since = now
		}
		b.last = now
		c.busy[gpu] = b
		return func() {}, now.Sub(b.since) < ClaimTTL
	}
	delete(c.busy, gpu)
	return func() { f.Close() }, false
}

// sendStep asks the chosen tenant to execute step, within PeerTimeout.
func (c *Coordinator) sendStep(ctx context.Context, socket string, step api.TenantStep) (api.TenantDecision, error) {
	return request(ctx, c.o.PeerTimeout, socket, func(cl *control.Client, ctx context.Context) (api.TenantDecision, error) {
		return cl.TenantStep(ctx, step)
	})
}

// Confirm records that this instance executes decision seq of gpu, with
// its grace as the GPU's cadence. It fails when the claim was voided (its
// decider gave up on it): then the step must not happen. It creates one
// file in the local runtime dir and asks no other tenant.
func (c *Coordinator) Confirm(gpu string, seq int64, grace time.Duration) (api.TenantDecision, error) {
	dir, err := GPUDir(c.o.RuntimeDir, gpu)
	if err != nil {
		return api.TenantDecision{}, err
	}
	e := End{By: c.o.Name, At: c.o.Now().UnixNano(), GraceSeconds: grace.Seconds()}
	if err := create(dir, endName(seq), e); err != nil {
		if errors.Is(err, ErrTaken) {
			return api.TenantDecision{}, fmt.Errorf("decision %d of GPU %s was given up by its decider", seq, gpu)
		}
		return api.TenantDecision{}, err
	}
	return api.TenantDecision{GPU: gpu, Seq: seq, To: c.o.Name, At: e.At, GraceSeconds: e.GraceSeconds}, nil
}

// Void ends claim seq of gpu unexecuted, unless it already ended.
func (c *Coordinator) Void(gpu string, seq int64) {
	if dir, err := GPUDir(c.o.RuntimeDir, gpu); err == nil {
		c.end(dir, seq, End{Void: true, By: c.o.Name, At: c.o.Now().UnixNano()})
	}
}

// end creates seq's end e; if the claim already ended it returns that end
// and false.
func (c *Coordinator) end(dir string, seq int64, e End) (*End, bool) {
	err := create(dir, endName(seq), e)
	if err == nil {
		return &e, true
	}
	if errors.Is(err, ErrTaken) {
		var prev End
		if readJSON(filepath.Join(dir, endName(seq)), &prev) {
			return &prev, prev.Void
		}
	}
	// Neither created nor readable: treat it as ended without a step.
	return nil, true
}

// voidAll voids stale claims; false when one of them had been confirmed.
func (c *Coordinator) voidAll(dir string, seqs []int64) bool {
	ok := true
	for _, seq := range seqs {
		if _, voided := c.end(dir, seq, End{Void: true, By: c.o.Name, At: c.o.Now().UnixNano()}); !voided {
			ok = false
		}
	}
	return ok
}

// Announce tells the other tenants of the GPU about an executed decision,
// concurrently and best effort (a tenant that misses it finds the decision
// in the log at its next proposal). It returns at once; Close waits.
func (c *Coordinator) Announce(d api.TenantDecision, sockets []string) {
	for _, s := range sockets {
		c.wg.Go(func() {
			request(context.Background(), c.o.PeerTimeout, s, func(cl *control.Client, ctx context.Context) (struct{}, error) {
				return struct{}{}, cl.TenantDecision(ctx, d)
			})
		})
	}
}

func without(ss []string, s string) []string {
	out := make([]string, 0, len(ss))
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
