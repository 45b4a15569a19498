package api

import "time"

// GPU is one watched device as shown by status and the control socket.
type GPU struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	UsedBytes  uint64 `json:"used_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	// Processes is the per-process usage where the backend knows it.
	Processes []GPUProcess `json:"processes,omitempty"`
	// Tenants names the instances that watch this GPU, lowest priority
	// first (ties by name). Only the top-level gpus of `status --json`
	// carry it (always, [] when none); an instance's own gpus leave it out.
	Tenants []string `json:"tenants,omitzero"`
}

// GPUProcess is one process's usage of a GPU.
type GPUProcess struct {
	PID       int    `json:"pid"`
	UsedBytes uint64 `json:"used_bytes"`
	// Command and User are filled in by `gpuguard status` on the host it
	// runs on (empty when the process is gone or not visible).
	Command string `json:"command,omitempty"`
	User    string `json:"user,omitempty"`
}

// Instance states, as in the contract.
const (
	StateStarting    = "starting"
	StateRunning     = "running"
	StateStepping    = "stepping"
	StateBackoff     = "backoff"
	StateWaiting     = "waiting"
	StateStopping    = "stopping"
	StateExited      = "exited"
	StateFatal       = "fatal"
	StateUnreachable = "unreachable"
	// StateAsleep: the instance is in a serving = false profile (server
	// actions): its server sleeps, or is stopped, and answers nothing.
	StateAsleep = "asleep"
)

// Status is the status object of one instance: the control socket's
// `status` reply and each element of `instances` in `status --json`.
type Status struct {
	Name      string  `json:"name"`
	PID       int     `json:"pid"`
	ChildPID  int     `json:"child_pid"`
	State     string  `json:"state"`
	Profile   string  `json:"profile"`
	Level     int     `json:"level"`
	Levels    int     `json:"levels"`
	Priority  int     `json:"priority"`
	Watermark float64 `json:"watermark"`
	// IntervalSeconds is the current polling period (adaptive polling
	// changes it).
	IntervalSeconds float64 `json:"interval_seconds"`
	// ETASeconds is the projected time until the watermark reaches
	// critical at the current trend; nil (JSON null) when not rising.
	ETASeconds         *float64 `json:"eta_seconds"`
	Restarts           int      `json:"restarts"`
	UptimeSeconds      float64  `json:"uptime_seconds"`
	ChildUptimeSeconds float64  `json:"child_uptime_seconds"`
	Observe            bool     `json:"observe"`
	GPUs               []GPU    `json:"gpus"`
	Leases             int      `json:"leases"`
	// Ready is the front door's view of the child (its health endpoint
	// answered 2xx and no planned restart has begun); without a front
	// door, whether a child runs.
	Ready bool `json:"ready"`
	// Held is how many requests the front door holds now (0 without one).
	Held int `json:"held"`
	// Tasks counts the deferred tasks queued and running (0 without any).
	Tasks int `json:"tasks"`
	// InFlight is how many requests the front door has passed to the
	// child and not finished answering (0 without a door); IdleSeconds how
	// long since the later of the last answer's end and the last wake (0
	// while a request is in flight or held; nil without a door). RoomFor
	// is the peer this instance sleeps for (nil when it does not).
	InFlight    int      `json:"in_flight"`
	IdleSeconds *float64 `json:"idle_seconds"`
	RoomFor     *string  `json:"room_for"`
	LastEvent   *Event   `json:"last_event"`
	// Fit is the newest fit event: why the child runs in its profile (or
	// why none runs). Nil (JSON null) before the first fit was judged.
	Fit *Event `json:"fit"`
	// Serve is the front door's listen address ([serve] listen), and
	// Models the names the instance answers to at `gpuguard door` (the
	// first is the one its server knows); both absent without a door.
	Serve  string   `json:"serve,omitempty"`
	Models []string `json:"models,omitempty"`
	// SimDir is the sim dir of an instance on the sim backend ("" on any
	// other): `gpuguard sim set` finds a running instance's GPUs by it.
	SimDir string `json:"sim_dir,omitempty"`
	// Error explains an unreachable instance; empty otherwise.
	Error string `json:"error,omitempty"`
}

// ProfileState is the content of the state file and, with Type "profile",
// the event published to socket subscribers at every live change.
type ProfileState struct {
	Type    string            `json:"type,omitempty"`
	Seq     int               `json:"seq"`
	Level   int               `json:"level"`
	Profile string            `json:"profile"`
	Env     map[string]string `json:"env"`
	Reason  string            `json:"reason"`
}

// Journal event names. More may be added; readers must skip unknown ones.
const (
	EventStart      = "start"
	EventExit       = "exit"
	EventStepDown   = "stepdown"
	EventStepUp     = "stepup"
	EventOOM        = "oom"
	EventRestart    = "restart"
	EventAdmission  = "admission"
	EventProbeError = "probe_error"
	EventGiveUp     = "giveup"
	EventStop       = "stop"
	// EventCritical records a sample above critical at the last profile,
	// where there is nothing lower to restart into.
	EventCritical = "critical"
	// EventObserve records what observe mode would have done.
	EventObserve = "observe"
	// EventWaiting records that no profile fits and the start waits.
	EventWaiting = "waiting"
	// EventYield records that another tenant of a shared GPU (To) steps
	// for this pressure, so this instance does not.
	EventYield = "yield"
	// EventReload records a policy reload: applied (Changed lists the
	// keys, empty when none changed) or refused (Reason "error", Detail the
	// problems; nothing changed).
	EventReload = "reload"
	// EventGPUFault records a GPU fault event (an Xid) on a watched GPU.
	EventGPUFault = "gpu_fault"
	// EventNotifySkipped records a live change whose notify signal was
	// not sent because the child does not catch it yet.
	EventNotifySkipped = "notify_skipped"
	// EventFit records how a start (or a wait for memory) chose its
	// profile: each profile tried with its needs, and the free memory on
	// the worst watched GPU (Tried, FreeBytes, LimitBytes, GPUIndex).
	EventFit = "fit"
	// EventWatermark is the per-minute record of the watermark while a
	// child runs (Minute): the minute just passed, or the part of it until
	// the child's exit, ending at the record's time.
	EventWatermark = "watermark"
	// EventReady records the child's first healthy answer to the front
	// door after a launch (AfterSeconds: how long after the launch).
	EventReady = "ready"
	// EventAction is a server action that succeeded (a 2xx), and
	// EventActionFailed one that did not (non-2xx, timeout, refused).
	EventAction       = "action"
	EventActionFailed = "action_failed"
	// EventRelieved is what a live change through server actions down the
	// ladder relieved, measured `grace` after its actions ended
	// (RelievedBytes; From and To the profiles): a 2xx is not trusted
	// blindly, and a change that left the watermark above high is followed
	// by the next step.
	EventRelieved = "relieved"
	// EventTotals is a cumulative record the journal writes (Totals): as
	// the first line of a run, of every file after a rotation, and every
	// few minutes, so a report need not read a run's first lines.
	EventTotals = "totals"
)

// Reasons used by step-down, restart and step-up events and metric labels.
const (
	ReasonWatermark = "watermark"
	ReasonCritical  = "critical"
	ReasonManual    = "manual"
	ReasonObserve   = "observe"
	ReasonOOM       = "oom"
	ReasonCrash     = "crash"
	ReasonRecovered = "recovered"
	// ReasonPredicted is a step-down taken before high because the trend
	// reaches critical within [watermark] lead.
	ReasonPredicted = "predicted"
	// ReasonGPUFault is a restart after a child exit caused by a GPU fault.
	ReasonGPUFault = "gpu_fault"
	// ReasonReload is a restart because a reload removed the profile.
	ReasonReload = "reload"
	// ReasonIdle: no request through the front door for [serve] idle;
	// ReasonRequest: a request held while asleep woke the server.
	ReasonIdle    = "idle"
	ReasonRequest = "request"
	// ReasonError is a reload event's reason when the reload was refused
	// (nothing changed); an applied reload's reason is empty.
	ReasonError = "error"
)

// Event is one line of the event journal (<state-dir>/events.jsonl).
type Event struct {
	Time    time.Time `json:"time"`
	Name    string    `json:"name,omitempty"`
	Event   string    `json:"event"`
	Profile string    `json:"profile"`
	Level   int       `json:"level"`

	Reason    string   `json:"reason,omitempty"`
	From      string   `json:"from,omitempty"`
	To        string   `json:"to,omitempty"`
	FromLevel *int     `json:"from_level,omitempty"`
	ToLevel   *int     `json:"to_level,omitempty"`
	Watermark float64  `json:"watermark,omitempty"`
	PID       int      `json:"pid,omitempty"`
	ExitCode  *int     `json:"exit_code,omitempty"`
	Signal    int      `json:"signal,omitempty"`
	Status    *int     `json:"status,omitempty"`
	Stderr    []string `json:"stderr,omitempty"`
	Detail    string   `json:"detail,omitempty"`
	Restarts  int      `json:"restarts,omitempty"`

	// GPU is the UUID of the GPU an event is about (yield, gpu_fault).
	GPU string `json:"gpu,omitempty"`
	// GPUIndex is that GPU's index, where known.
	GPUIndex *int `json:"gpu_index,omitempty"`
	// Xid is a GPU fault's Xid (gpu_fault).
	Xid int `json:"xid,omitempty"`
	// AfterSeconds is how long after its launch the child first answered
	// its health check (ready).
	AfterSeconds float64 `json:"after_seconds,omitempty"`
	// Path, Seconds and Error describe a server action (action,
	// action_failed): the path on upstream, how long it took, and why it
	// failed; Status is its HTTP status when one came back.
	Path    string  `json:"path,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Error   string  `json:"error,omitempty"`
	// RelievedBytes is the memory a live change freed (relieved): what
	// the child held before it less what it holds `grace` after, 0 when
	// it holds as much or more; absent when either reading is missing.
	RelievedBytes *uint64 `json:"relieved_bytes,omitempty"`
	// Changed lists the policy keys a reload changed (reload).
	// Non-nil on every applied reload: "changed":[] says nothing changed.
	Changed []string `json:"changed,omitzero"`

	// Admission fields.
	Decision string `json:"decision,omitempty"`
	Bytes    uint64 `json:"bytes,omitempty"`
	Priority string `json:"priority,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Lease    string `json:"lease,omitempty"`
	// Count, on an admission line, says it summarises that many granted
	// (decision gpu) admissions of the second before Time; Bytes is then
	// their sum. A line for a single decision has no count.
	Count int `json:"count,omitempty"`
	// ByPriority and ByTool split a summary's Count.
	ByPriority map[string]int `json:"by_priority,omitempty"`
	ByTool     map[string]int `json:"by_tool,omitempty"`

	// Fit fields: the profiles a start tried, best first, and the free
	// memory (limit - used) and limit (quota, else total) of the worst
	// watched GPU, the one with the least room under high.
	Tried      []FitTry `json:"tried,omitempty"`
	FreeBytes  *uint64  `json:"free_bytes,omitempty"`
	LimitBytes uint64   `json:"limit_bytes,omitempty"`
	// Ticket names a deferred task (deferred, task, task_done, ...);
	// Attempt is a delivery's number (task), WaitSeconds how long the task
	// waited from its deferral to this delivery.
	Ticket      string  `json:"ticket,omitempty"`
	Attempt     int     `json:"attempt,omitempty"`
	WaitSeconds float64 `json:"wait_seconds,omitempty"`

	// Making room: For is the peer a stepdown with reason room was taken
	// for; Slept the peers put to sleep for a room event, FreedBytes what
	// their sleeps freed on GPU; NeedBytes, FreeBytes and CouldFreeBytes
	// are a no_room event's figures.
	For            string   `json:"for,omitempty"`
	Slept          []string `json:"slept,omitempty"`
	FreedBytes     *uint64  `json:"freed_bytes,omitempty"`
	NeedBytes      uint64   `json:"need_bytes,omitempty"`
	CouldFreeBytes *uint64  `json:"could_free_bytes,omitempty"`

	// Totals is the content of a totals record.
	Totals *Totals `json:"totals,omitempty"`
	// Minute is the content of a watermark record; its fields are the
	// line's own (min, mean, max, samples, high, critical).
	*Minute
}

// Minute summarises the watermark samples of one wall-clock minute (or of
// its part until the child's exit), as a watermark record. GPU (the line's
// gpu) is the watched GPU with the highest sample.
type Minute struct {
	// Min, Mean and Max are of the watermark ratio (0..1).
	Min     float64 `json:"min"`
	Mean    float64 `json:"mean"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
	// High and Critical are the thresholds in force at the minute's end,
	// so a picture of the minute can draw the lines it was judged by.
	High     float64 `json:"high"`
	Critical float64 `json:"critical"`
}

// FitTry is one profile a start tried: its needs estimate (0: none, so it
// always fits) and whether that fits the worst watched GPU.
type FitTry struct {
	Profile    string `json:"profile"`
	Level      int    `json:"level"`
	NeedsBytes uint64 `json:"needs_bytes"`
	Fits       bool   `json:"fits"`
}

// Totals is what one gpuguard run has done since it opened the journal,
// cumulative, as of the record's time. A run's records share RunStart.
type Totals struct {
	// RunStart is when this run opened the journal: its records share it,
	// and a new value marks a new run.
	RunStart time.Time `json:"run_start"`
	// FirstProfile and FirstLevel are the profile of the run's first start.
	FirstProfile string `json:"first_profile,omitempty"`
	FirstLevel   int    `json:"first_level"`
	// Running says a child was running at the record's time, in the line's
	// profile and level.
	Running bool `json:"running"`
	// SecondsInProfile is supervised (child running) time by profile;
	// ProfileLevels is each such profile's level.
	SecondsInProfile map[string]float64 `json:"seconds_in_profile"`
	ProfileLevels    map[string]int     `json:"profile_levels"`
	// Events counts events by name; an admission summary counts as its
	// Count, totals records do not count.
	Events map[string]int `json:"events"`
	// Stepdowns and Restarts are by reason, Admissions by decision.
	Stepdowns    map[string]int `json:"stepdowns"`
	Restarts     map[string]int `json:"restarts"`
	Admissions   map[string]int `json:"admissions"`
	OOMFallbacks int            `json:"oom_fallbacks"`
	// Yields counts yield events by the tenant that stepped (To).
	Yields map[string]int `json:"yields,omitempty"`
}
