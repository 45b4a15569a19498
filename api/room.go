package api

import "time"

// Making room: an instance that must wake, start or restart and does not
// fit on a GPU asks the GPU's other tenants for the memory, and idle ones
// sleep for it (docs/sharing.md, "Making room"). These are the words the
// asker, its coordinator and the asked tenant share.

// Journal events of making room.
const (
	// EventRoom: peers slept and the asker fits now (GPU, Slept in order,
	// FreedBytes, Seconds from the first ask to the fit).
	EventRoom = "room"
	// EventNoRoom: the candidates together cannot cover the shortfall; the
	// asker waits as it would without make_room. Once per wait (GPU,
	// NeedBytes, FreeBytes, CouldFreeBytes).
	EventNoRoom = "no_room"
)

// ReasonRoom is the reason of a step into a serving = false profile taken
// to make room for another tenant (the stepdown event's For names it).
const ReasonRoom = "room"

// TenantRoom is what a tenant tells the others of its GPUs about putting
// it to sleep for them (TenantInfo.Room). Serving, CanSleep,
// KeepAwakeSeconds, SleepBytes and UsedBytes are published in the
// tenant's record; Busy, IdleSeconds and LastUsed change with every
// request, so they are read live from the `tenant` answer (the record's
// copy is stale).
type TenantRoom struct {
	// Serving: the instance runs in a serving profile with nothing else
	// under way (a step, a restart, a start).
	Serving bool `json:"serving"`
	// CanSleep: it has a serving = false profile, a front door and
	// [serve] wake = true, so a request brings it back.
	CanSleep         bool    `json:"can_sleep"`
	KeepAwakeSeconds float64 `json:"keep_awake_seconds"`
	// SleepBytes is its sleeping profile's needs (what it still holds
	// asleep); UsedBytes what it uses while it serves: measured the last
	// time it served where the backend lists processes, else its
	// profile's needs (the asker takes the larger of it and the usage
	// measured now).
	SleepBytes uint64 `json:"sleep_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
	// Busy: a request is in flight or held at its door. IdleSeconds: since
	// the later of its last answer's end and its last wake (0 while busy).
	// LastUsed: when it last answered a request (unix ns), else when it
	// first became ready.
	Busy        bool    `json:"busy"`
	IdleSeconds float64 `json:"idle_seconds"`
	LastUsed    int64   `json:"last_used"`
	// For is the peer it sleeps for, while it does.
	For string `json:"for,omitempty"`
}

// TenantSleep is the internal `tenant_sleep` request: tenant For, of
// Priority, needs room on GPU and asks the receiver to sleep for it, at
// At (unix ns). The receiver checks its own facts and accepts (it steps
// into its first serving = false profile, reason room) or refuses.
type TenantSleep struct {
	GPU      string `json:"gpu"`
	For      string `json:"for"`
	Priority int    `json:"priority"`
	At       int64  `json:"at"`
}

// RoomAsk is what an instance that needs room on GPU asks its
// coordinator: Shortfall bytes more than fit there now, for an instance
// of Priority.
type RoomAsk struct {
	GPU       string
	Priority  int
	Shortfall uint64
}

// RoomOutcome is the coordinator's answer to a RoomAsk: Slept is the
// tenant put to sleep (its sleep is done), "" when none was; CouldFree is
// what all the candidates together would have freed; RetryIn, when no
// one slept, how soon a peer kept out only by time (a request in flight,
// its keep_awake) may be a candidate (0: none is); Err, when set, says
// why no ask could be made.
type RoomOutcome struct {
	GPU       string
	Slept     string
	CouldFree uint64
	RetryIn   time.Duration
	Err       error
}
