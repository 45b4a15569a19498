package supervisor

import (
	"context"
	"errors"
	"slices"

	"github.com/gpuguard/gpuguard/admission"
	"github.com/gpuguard/gpuguard/api"
)

// TenantInfo is what this instance tells the other tenants of its GPUs
// (the `tenant` request). It is read from the snapshot the loop publishes
// and from the ledger and the starting flag directly, never through the
// loop: a busy loop must not delay another tenant's decision.
func (s *Supervisor) TenantInfo() api.TenantInfo {
	info := *s.tenant.Load()
	info.Starting = s.starting.Load()
	info.LeasesBytes = s.ledger.Outstanding()
	return info
}

// TenantStep executes a decision another tenant took for this instance, or
// refuses it (see execShared).
func (s *Supervisor) TenantStep(ctx context.Context, st api.TenantStep) (api.TenantDecision, error) {
	r, err := s.call(ctx, request{op: opTenantStep, tenantStep: st})
	return r.tenantDecision, err
}

// TenantDecision notes a decision another tenant executed on a GPU this
// instance watches: a yield, and the GPU's cadence.
func (s *Supervisor) TenantDecision(ctx context.Context, d api.TenantDecision) error {
	_, err := s.call(ctx, request{op: opTenantDecision, tenantDecision: d})
	return err
}

// Ready records that the child has finished starting: on a shared GPU the
// next tenant may start its own.
func (s *Supervisor) Ready(ctx context.Context) error {
	_, err := s.call(ctx, request{op: opReady})
	return err
}

// Reserve decides an admission request against measured usage and the
// outstanding leases: this instance's and, on a shared GPU, every other
// tenant's. The GPUs' admission locks and the other tenants' leases are
// gathered here, off the loop; the decision itself (pure) and its journal
// line are the loop's, so a lease is never granted to a child that has
// just exited. The locks are held until the lease is recorded.
func (s *Supervisor) Reserve(ctx context.Context, req admission.Request) (admission.Decision, error) {
	return s.reserve(ctx, req, false)
}

// reserve is Reserve; quiet journals only a granted reservation (the
// deliverer asks for each queued task at every sample while memory is
// short, and would journal a defer each time).
func (s *Supervisor) reserve(ctx context.Context, req admission.Request, quiet bool) (admission.Decision, error) {
	r := request{op: opReserve, reserve: req, quiet: quiet}
	if c := s.deps.Coordinator; c != nil {
		if gpus := s.watched(); len(gpus) > 0 {
			adm, err := c.Admit(ctx, gpus)
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
	resp, err := s.call(ctx, r)
	d := resp.decision
	if err != nil || d.Lease == "" || r.others == nil {
		return d, err
	}
	// The others must see the lease before the admission lock goes.
	if perr := s.publishLeases(); perr != nil {
		s.ledger.Release(d.Lease)
		d = admission.Refuse(req, "the lease could not be published to the other tenants of the GPU: "+perr.Error())
		_, err = s.call(ctx, request{op: opEmit, event: api.Event{Event: api.EventAdmission, Decision: d.Decision,
			Bytes: req.Bytes, Priority: req.Priority, Tool: admission.CutTool(req.Tool), Reason: d.Reason}})
	}
	return d, err
}

// publishLeases tells the other tenants of the watched GPUs how much this
// instance has leased (see tenants.Coordinator.SetLeases).
func (s *Supervisor) publishLeases() error {
	c := s.deps.Coordinator
	if c == nil {
		return nil
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	gpus := s.watched()
	if len(gpus) == 0 {
		return nil
	}
	f := leaseFigure{gpus: gpus, bytes: s.ledger.Outstanding()}
	if s.leasesOut != nil && s.leasesOut.equal(f) {
		return nil // the others already see this figure
	}
	s.leasesOut = nil
	err := c.SetLeases(gpus, f.bytes)
	if err != nil {
		s.deps.Logf("%v", err)
		return err
	}
	s.leasesOut = &f
	return nil
}

// leaseFigure is one publication of the leases: how much, on which GPUs.
type leaseFigure struct {
	gpus  []string
	bytes uint64
}

func (f leaseFigure) equal(g leaseFigure) bool {
	return f.bytes == g.bytes && slices.Equal(f.gpus, g.gpus)
}

// watched are the UUIDs of the GPUs in the newest published snapshot.
func (s *Supervisor) watched() []string {
	gpus := s.snap.Load().status.GPUs
	out := make([]string, 0, len(gpus))
	for _, g := range gpus {
		if g.UUID != "" {
			out = append(out, g.UUID)
		}
	}
	return out
}

// tenantInfo is the loop's current TenantInfo, without the parts read live.
func (l *loop) tenantInfo() api.TenantInfo {
	info := api.TenantInfo{Name: l.cfg.Name, PID: l.s.snap.Load().status.PID, Priority: l.pol.Priority,
		Scope: l.pol.Watch.Scope, Observe: l.cfg.Observe, State: l.life.state, Level: l.level,
		Levels: len(l.pol.Profiles), GPUs: []api.TenantGPU{},
		GraceSeconds: l.pol.Watermark.Grace.Seconds(), SettleSeconds: l.pol.Watch.Settle.Seconds()}
	if !l.latest.haveSample {
		return info
	}
	own := !l.latest.lastSample.ProcessesAt.IsZero()
	for _, d := range l.latest.lastSample.Devices {
		g := api.TenantGPU{UUID: d.UUID}
		if own && l.life.run.child != nil {
			for _, p := range l.latest.lastSample.Processes {
				if p.Device == d.Index && l.life.run.childTree[p.PID] {
					g.UsedBytes += p.Used
				}
			}
		}
		info.GPUs = append(info.GPUs, g)
	}
	return info
}
