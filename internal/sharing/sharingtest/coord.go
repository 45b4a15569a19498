// Package sharingtest is a fake coordinator of the tenants of a shared
// GPU (sharing.Coordinator) for tests: the agreement's own tests in
// internal/sharing and the supervisor's, which run an instance's loop
// over it.
package sharingtest

import (
	"context"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// GPU is the UUID of the fake GPU the tests share.
const GPU = "GPU-fake-0"

// Coord is a coordinator whose answers the test decides, and which
// records what it was asked. By default a proposal is a Step for the
// proposer (a lone tenant: SelfStep), a start is granted, a reservation
// sees no other tenant and an ask for room finds no candidate. Set the
// hooks before the coordinator is used, or through Set.
type Coord struct {
	mu sync.Mutex
	// DecideFunc answers a proposal (seq: the how-manieth).
	DecideFunc func(p api.Proposal, seq int64) api.Outcome
	// ClaimFunc answers a start's claim.
	ClaimFunc func(gpus []string) api.StartOutcome
	// AdmitFunc answers a reservation's admission.
	AdmitFunc func(gpus []string) (*api.Admission, error)
	// ConfirmErr fails the confirmation of a decision.
	ConfirmErr func(gpu string, seq int64) error
	// Block, when set, holds every Decide until it is closed.
	Block chan struct{}
	// RoomFunc answers an ask for room.
	RoomFunc func(ask api.RoomAsk) api.RoomOutcome
	// LeaseErr fails every SetLeases.
	LeaseErr error

	seq       int64
	proposals []api.Proposal
	confirms  []api.TenantDecision
	voids     []int64
	announced []api.TenantDecision
	claims    [][]string
	leases    []uint64 // every SetLeases figure
	info      api.TenantInfo
	asks      []api.RoomAsk
}

func (f *Coord) Decide(ctx context.Context, p api.Proposal) api.Outcome {
	f.mu.Lock()
	f.proposals = append(f.proposals, p)
	f.seq++
	seq, decide, block := f.seq, f.DecideFunc, f.Block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return api.Outcome{Kind: api.OutcomeHold}
		}
	}
	if decide != nil {
		return decide(p, seq)
	}
	return SelfStep(p, seq)
}

// SelfStep is the Step outcome for the proposer of p, claimed now.
func SelfStep(p api.Proposal, seq int64) api.Outcome {
	return api.Outcome{Kind: api.OutcomeStep, Claim: api.TenantStep{GPU: p.GPU, Seq: seq, Kind: p.Kind, By: p.Self.Name,
		At: time.Now().UnixNano(), Watermark: p.Watermark}}
}

func (f *Coord) Confirm(gpu string, seq int64, grace time.Duration) (api.TenantDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ConfirmErr != nil {
		if err := f.ConfirmErr(gpu, seq); err != nil {
			return api.TenantDecision{}, err
		}
	}
	d := api.TenantDecision{GPU: gpu, Seq: seq, To: "t", At: time.Now().UnixNano(), GraceSeconds: grace.Seconds()}
	f.confirms = append(f.confirms, d)
	return d, nil
}

func (f *Coord) Void(gpu string, seq int64) {
	f.mu.Lock()
	f.voids = append(f.voids, seq)
	f.mu.Unlock()
}

func (f *Coord) Announce(d api.TenantDecision, sockets []string) {
	f.mu.Lock()
	f.announced = append(f.announced, d)
	f.mu.Unlock()
}

func (f *Coord) ClaimStart(ctx context.Context, gpus []string, settle time.Duration) api.StartOutcome {
	f.mu.Lock()
	f.claims = append(f.claims, gpus)
	claim := f.ClaimFunc
	f.mu.Unlock()
	if claim != nil {
		return claim(gpus)
	}
	return api.StartOutcome{Granted: true}
}

func (f *Coord) Admit(ctx context.Context, gpus []string) (*api.Admission, error) {
	f.mu.Lock()
	admit := f.AdmitFunc
	f.mu.Unlock()
	if admit != nil {
		return admit(gpus)
	}
	return &api.Admission{Others: map[string]uint64{}}, nil
}

func (f *Coord) SetLeases(gpus []string, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.LeaseErr != nil {
		return f.LeaseErr
	}
	f.leases = append(f.leases, bytes)
	return nil
}

func (f *Coord) Publish(info api.TenantInfo) {
	f.mu.Lock()
	f.info = info
	f.mu.Unlock()
}

func (f *Coord) MakeRoom(ctx context.Context, ask api.RoomAsk) api.RoomOutcome {
	f.mu.Lock()
	f.asks = append(f.asks, ask)
	room := f.RoomFunc
	f.mu.Unlock()
	if room != nil {
		return room(ask)
	}
	return api.RoomOutcome{GPU: ask.GPU}
}

// Set changes the hooks while the coordinator is in use.
func (f *Coord) Set(mod func(f *Coord)) {
	f.mu.Lock()
	mod(f)
	f.mu.Unlock()
}

// Proposals are the proposals decided so far.
func (f *Coord) Proposals() []api.Proposal { return snapshot(f, &f.proposals) }

// Confirms are the decisions confirmed so far.
func (f *Coord) Confirms() []api.TenantDecision { return snapshot(f, &f.confirms) }

// Voids are the seqs voided so far.
func (f *Coord) Voids() []int64 { return snapshot(f, &f.voids) }

// Announced are the decisions announced so far.
func (f *Coord) Announced() []api.TenantDecision { return snapshot(f, &f.announced) }

// snapshot is a copy of *list, one of f's records, taken under f's lock.
func snapshot[T any](f *Coord, list *[]T) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]T(nil), *list...)
}

// Claimed is how many starts were claimed.
func (f *Coord) Claimed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.claims)
}

// Published is every leases figure published, in order.
func (f *Coord) Published() []uint64 { return snapshot(f, &f.leases) }

// LastInfo is the TenantInfo published last.
func (f *Coord) LastInfo() api.TenantInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info
}

// RoomAsks are the asks for room made so far.
func (f *Coord) RoomAsks() []api.RoomAsk { return snapshot(f, &f.asks) }
