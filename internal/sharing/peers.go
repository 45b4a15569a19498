package sharing

import "github.com/gpuguard/gpuguard/api"

// Peers is one instance's dealings with the other tenants of its GPUs:
// the agreement on steps, the one start at a time, and what the others
// know of it. The supervisor's loop calls it (from its goroutine, but for
// the tenancy's lease publications, which are safe from any); its slow
// calls to the coordinator run off the loop and answer on channels.
type Peers struct {
	agreement
	startOrder
	tenancy
	roomAsker
}

// New is the instance's side of sharing over c; logf prints gpuguard's
// log lines.
func New(c Coordinator, logf func(format string, args ...any)) *Peers {
	return &Peers{
		agreement:  newAgreement(c, logf),
		startOrder: startOrder{c: c, starts: make(chan api.StartOutcome, 1)},
		tenancy:    tenancy{c: c, logf: logf},
		roomAsker:  roomAsker{c: c, out: make(chan api.RoomOutcome, 1)},
	}
}
