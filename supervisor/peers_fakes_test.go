package supervisor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/sharing"
)

const fakeGPU = "GPU-fake-0"

// fakeCoord is a Coordinator whose answers the test decides. By default a
// proposal is a Step for the proposer (a lone tenant), a start is granted
// and a reservation sees no other tenant.
type fakeCoord struct {
	mu        sync.Mutex
	seq       int64
	decide    func(p api.Proposal, seq int64) api.Outcome
	claim     func(gpus []string) api.StartOutcome
	admit     func(gpus []string) (*api.Admission, error)
	confirmOK func(gpu string, seq int64) error
	block     chan struct{} // when set, Decide waits for it to close

	proposals []api.Proposal
	confirms  []api.TenantDecision
	voids     []int64
	announced []api.TenantDecision
	claims    [][]string
	admits    int
	leases    []uint64 // every SetLeases figure
	leaseErr  error
	info      api.TenantInfo // the last published
	// room answers a MakeRoom (nil: no candidate); asks records them.
	room func(ask api.RoomAsk) api.RoomOutcome
	asks []api.RoomAsk
}

func (f *fakeCoord) Decide(ctx context.Context, p api.Proposal) api.Outcome {
	f.mu.Lock()
	f.proposals = append(f.proposals, p)
	f.seq++
	seq, decide, block := f.seq, f.decide, f.block
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
	return selfStep(p, seq)
}

// selfStep is the Step outcome for the proposer, claimed now.
func selfStep(p api.Proposal, seq int64) api.Outcome {
	return api.Outcome{Kind: api.OutcomeStep, Claim: api.TenantStep{GPU: p.GPU, Seq: seq, Kind: p.Kind, By: p.Self.Name,
		At: time.Now().UnixNano(), Watermark: p.Watermark}}
}

func (f *fakeCoord) Confirm(gpu string, seq int64, grace time.Duration) (api.TenantDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.confirmOK != nil {
		if err := f.confirmOK(gpu, seq); err != nil {
			return api.TenantDecision{}, err
		}
	}
	d := api.TenantDecision{GPU: gpu, Seq: seq, To: "t", At: time.Now().UnixNano(), GraceSeconds: grace.Seconds()}
	f.confirms = append(f.confirms, d)
	return d, nil
}

func (f *fakeCoord) Void(gpu string, seq int64) {
	f.mu.Lock()
	f.voids = append(f.voids, seq)
	f.mu.Unlock()
}

func (f *fakeCoord) Announce(d api.TenantDecision, sockets []string) {
	f.mu.Lock()
	f.announced = append(f.announced, d)
	f.mu.Unlock()
}

func (f *fakeCoord) ClaimStart(ctx context.Context, gpus []string, settle time.Duration) api.StartOutcome {
	f.mu.Lock()
	f.claims = append(f.claims, gpus)
	claim := f.claim
	f.mu.Unlock()
	if claim != nil {
		return claim(gpus)
	}
	return api.StartOutcome{Granted: true}
}

func (f *fakeCoord) Admit(ctx context.Context, gpus []string) (*api.Admission, error) {
	f.mu.Lock()
	f.admits++
	admit := f.admit
	f.mu.Unlock()
	if admit != nil {
		return admit(gpus)
	}
	return &api.Admission{Others: map[string]uint64{}}, nil
}

func (f *fakeCoord) SetLeases(gpus []string, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseErr != nil {
		return f.leaseErr
	}
	f.leases = append(f.leases, bytes)
	return nil
}

func (f *fakeCoord) Publish(info api.TenantInfo) {
	f.mu.Lock()
	f.info = info
	f.mu.Unlock()
}

func (f *fakeCoord) MakeRoom(ctx context.Context, ask api.RoomAsk) api.RoomOutcome {
	f.mu.Lock()
	f.asks = append(f.asks, ask)
	room := f.room
	f.mu.Unlock()
	if room != nil {
		return room(ask)
	}
	return api.RoomOutcome{GPU: ask.GPU}
}

// roomAsks are the asks for room made so far.
func (f *fakeCoord) roomAsks() []api.RoomAsk {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.RoomAsk(nil), f.asks...)
}

// lastInfo is the TenantInfo published last.
func (f *fakeCoord) lastInfo() api.TenantInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info
}

func (f *fakeCoord) published() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.leases...)
}

func (f *fakeCoord) set(mod func(f *fakeCoord)) {
	f.mu.Lock()
	mod(f)
	f.mu.Unlock()
}

func (f *fakeCoord) got() (proposals []api.Proposal, confirms []api.TenantDecision, voids []int64, announced []api.TenantDecision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.Proposal(nil), f.proposals...), append([]api.TenantDecision(nil), f.confirms...),
		append([]int64(nil), f.voids...), append([]api.TenantDecision(nil), f.announced...)
}

func (f *fakeCoord) claimed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.claims)
}

var errVoided = errors.New("decision was given up by its decider")

// withCoord wires the instance's peers over fc into the harness.
func withCoord(fc *fakeCoord, more ...func(*Config, *Deps)) func(*Config, *Deps) {
	return func(c *Config, d *Deps) {
		for _, m := range more {
			m(c, d)
		}
		d.Peers = sharing.New(fc, d.Logf)
	}
}
