package supervisor

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// Admission decides who may use the GPUs' memory: the reservations and
// releases of the child's tools (the control socket's reserve and
// release), over the ledger of leases, and, on a shared GPU, the other
// tenants: what they are told of this instance (TenantInfo, the leases
// published to them, through Peers) and what they ask of it (a step, a
// decision to note, the child's readiness). Its methods are safe from any
// goroutine; what changes the instance goes to the loop through port.
type Admission struct {
	port  loopPort
	peers Peers // nil: no other tenants
	// snap is the Supervisor's published snapshot: its GPUs are the ones
	// a reservation is coordinated on.
	snap *atomic.Pointer[snapshot]

	// ledger holds the admission leases; the loop decides and expires
	// them, and Reserve's coordination and the `tenant` answer read it off
	// the loop (it is safe for that).
	ledger *admission.Ledger
	// tenant is what the `tenant` request answers, published by the loop;
	// liveRoom fills in its making-room facts that change with every
	// request (Supervisor.liveRoom).
	tenant   atomic.Pointer[api.TenantInfo]
	liveRoom func(*api.TenantRoom)
}

func newAdmission(port loopPort, peers Peers, snap *atomic.Pointer[snapshot]) *Admission {
	return &Admission{port: port, peers: peers, snap: snap, ledger: admission.NewLedger()}
}

// TenantInfo is what this instance tells the other tenants of its GPUs
// (the `tenant` request). It is read from what the loop last published
// and from the ledger and the start claim directly, never through the
// loop: a busy loop must not delay another tenant's decision.
func (a *Admission) TenantInfo() api.TenantInfo {
	info := *a.tenant.Load()
	info.Starting = a.peers != nil && a.peers.Starting()
	info.LeasesBytes = a.ledger.Outstanding()
	if info.Room != nil && a.liveRoom != nil {
		r := *info.Room
		a.liveRoom(&r)
		info.Room = &r
	}
	return info
}

// TenantSleep is another tenant's ask that this instance sleep to make
// room for it: its core accepts (the reply comes as the sleep begins) or
// refuses, saying why.
func (a *Admission) TenantSleep(ctx context.Context, ts api.TenantSleep) error {
	_, err := a.port.call(ctx, request{op: opTenantSleep, tenantSleep: ts})
	return err
}

// TenantStep executes a decision another tenant took for this instance, or
// refuses it (Agreement.Step).
func (a *Admission) TenantStep(ctx context.Context, st api.TenantStep) (api.TenantDecision, error) {
	r, err := a.port.call(ctx, request{op: opTenantStep, tenantStep: st})
	return r.tenantDecision, err
}

// TenantDecision notes a decision another tenant executed on a GPU this
// instance watches: a yield, and the GPU's cadence.
func (a *Admission) TenantDecision(ctx context.Context, d api.TenantDecision) error {
	_, err := a.port.call(ctx, request{op: opTenantDecision, tenantDecision: d})
	return err
}

// Ready records that the child has finished starting: on a shared GPU the
// next tenant may start its own.
func (a *Admission) Ready(ctx context.Context) error {
	_, err := a.port.call(ctx, request{op: opReady})
	return err
}

// Reserve decides an admission request against measured usage and the
// outstanding leases: this instance's and, on a shared GPU, every other
// tenant's. The GPUs' admission locks and the other tenants' leases are
// gathered here, off the loop; the decision itself (pure) and its journal
// line are the loop's, so a lease is never granted to a child that has
// just exited. The locks are held until the lease is recorded.
func (a *Admission) Reserve(ctx context.Context, req admission.Request) (admission.Decision, error) {
	return a.reserve(ctx, req, false)
}

// Release ends a lease. The others see the lower figure a little later
// (Tenancy.PublishLeasesSoon).
func (a *Admission) Release(ctx context.Context, lease string) error {
	_, err := a.port.call(ctx, request{op: opRelease, lease: lease})
	if err == nil && a.peers != nil {
		a.peers.PublishLeasesSoon(a.ledger.Outstanding, a.port.done)
	}
	return err
}

// reserve is Reserve; quiet journals only a granted reservation (the
// deliverer asks for each queued task at every sample while memory is
// short, and would journal a defer each time).
func (a *Admission) reserve(ctx context.Context, req admission.Request, quiet bool) (admission.Decision, error) {
	r := request{op: opReserve, reserve: req, quiet: quiet}
	if p := a.peers; p != nil {
		if gpus := a.watched(); len(gpus) > 0 {
			adm, err := p.Admit(ctx, gpus)
			switch {
			case err == nil:
				defer adm.Release()
				r.others = adm.Others
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
				return admission.Decision{}, err
			default:
				r.refuse = err.Error()
			}
		}
	}
	resp, err := a.port.call(ctx, r)
	d := resp.decision
	if err != nil || d.Lease == "" || r.others == nil {
		return d, err
	}
	// The others must see the lease before the admission lock goes.
	if perr := a.peers.PublishLeases(a.ledger.Outstanding); perr != nil {
		a.ledger.Release(d.Lease)
		d = admission.Refuse(req, "the lease could not be published to the other tenants of the GPU: "+perr.Error())
		_, err = a.port.call(ctx, request{op: opEmit, event: api.Event{Event: api.EventAdmission, Decision: d.Decision,
			Bytes: req.Bytes, Priority: req.Priority, Tool: admission.CutTool(req.Tool), Reason: d.Reason}})
	}
	return d, err
}

// leasesChanged publishes the leases after the loop changed them
// (expiry, the child's exit), off the loop.
func (a *Admission) leasesChanged() {
	if a.peers != nil {
		go a.peers.PublishLeases(a.ledger.Outstanding)
	}
}

// flushLeases publishes at the end of the run what releases left and the
// others have not seen yet.
func (a *Admission) flushLeases() {
	if a.peers != nil {
		a.peers.FlushLeases(a.ledger.Outstanding)
	}
}

// watched are the UUIDs of the GPUs in the newest published snapshot.
func (a *Admission) watched() []string {
	gpus := a.snap.Load().status.GPUs
	out := make([]string, 0, len(gpus))
	for _, g := range gpus {
		if g.UUID != "" {
			out = append(out, g.UUID)
		}
	}
	return out
}
