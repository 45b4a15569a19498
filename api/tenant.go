package api

// TenantInfo is what one instance tells the other tenants of its GPUs: the
// reply to the internal `tenant` request. It is answered from a snapshot the
// supervisor publishes, never through its loop, so a busy instance answers
// at once.
type TenantInfo struct {
	Name     string `json:"name"`
	PID      int    `json:"pid"`
	Priority int    `json:"priority"`
	Scope    string `json:"scope"`
	Observe  bool   `json:"observe"`
	// State is the status object's state; only an instance whose child
	// runs (running, starting) can take a step.
	State  string      `json:"state"`
	Level  int         `json:"level"`
	Levels int         `json:"levels"`
	GPUs   []TenantGPU `json:"gpus"`
	// Starting: the instance holds a start claim, from the claim until its
	// child has settled (or said ready).
	Starting bool `json:"starting"`
	// LeasesBytes is the sum of its outstanding admission leases.
	LeasesBytes   uint64  `json:"leases_bytes"`
	GraceSeconds  float64 `json:"grace_seconds"`
	SettleSeconds float64 `json:"settle_seconds"`
	// Room is what making room needs of it (nil: it never sleeps for a
	// peer: no front door, or nothing to sleep in).
	Room *TenantRoom `json:"room,omitempty"`
}

// TenantGPU is one GPU a tenant watches, with its own child tree's usage of
// it (0 when the backend does not tell processes apart).
type TenantGPU struct {
	UUID      string `json:"uuid"`
	UsedBytes uint64 `json:"used_bytes"`
}

// Watches reports whether t watches the GPU uuid.
func (t TenantInfo) Watches(uuid string) bool {
	_, ok := t.Used(uuid)
	return ok
}

// Used is t's own usage of the GPU uuid, and whether t watches it.
func (t TenantInfo) Used(uuid string) (uint64, bool) {
	for _, g := range t.GPUs {
		if g.UUID == uuid {
			return g.UsedBytes, true
		}
	}
	return 0, false
}

// Decision kinds: what a shared-GPU decision asks the chosen tenant to do.
const (
	KindDown      = "down"      // step one profile down (reason watermark)
	KindPredicted = "predicted" // step one profile down (reason predicted)
	KindCritical  = "critical"  // restart one profile lower (reason critical)
	KindUp        = "up"        // step one profile up (reason recovered)
)

// TenantStep is the internal `tenant_step` request: the tenant By claimed
// decision Seq of the GPU's decision log at At (unix ns) for the receiver.
type TenantStep struct {
	GPU  string `json:"gpu"`
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	By   string `json:"by"`
	At   int64  `json:"at"`
	// Watermark is the proposer's reading, for the step's detail.
	Watermark float64 `json:"watermark,omitempty"`
}

// TenantDecision is an executed decision: the reply to `tenant_step` and
// the internal `tenant_decision` request that tells the other tenants.
// At is when it was executed (unix ns); no tenant of the GPU steps again
// before At + GraceSeconds.
type TenantDecision struct {
	GPU          string  `json:"gpu"`
	Seq          int64   `json:"seq"`
	Kind         string  `json:"kind"`
	To           string  `json:"to"`
	At           int64   `json:"at"`
	GraceSeconds float64 `json:"grace_seconds"`
}
