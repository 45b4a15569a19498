package api

import (
	"encoding/json"
	"time"
)

// Deferred-task states, as `gpuguard tasks` shows them.
const (
	TaskQueued  = "queued"
	TaskRunning = "running"
	TaskDone    = "done"
	TaskDead    = "dead"
)

// Journal events of deferred tasks, each with ticket and tool.
const (
	EventDeferred    = "deferred"
	EventTask        = "task" // delivered, with attempt
	EventTaskDone    = "task_done"
	EventTaskFailed  = "task_failed"
	EventTaskDead    = "task_dead"
	EventTaskDropped = "task_dropped"
)

// Task is one deferred task as a store keeps it. The supervisor, the
// control socket and `gpuguard tasks` share it, so that none of them
// depends on a store's own types.
type Task struct {
	Ticket   string          `json:"ticket"`
	Tool     string          `json:"tool"`
	Priority string          `json:"priority"`
	Bytes    uint64          `json:"bytes"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	State    string          `json:"state"`
	// Attempts counts the deliveries that failed or timed out.
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	Enqueued  time.Time `json:"enqueued"`
	// NotBefore is when a queued task may be delivered again (backoff).
	NotBefore time.Time `json:"not_before,omitzero"`
	// Finished is when a done task was done (keep_results counts from it).
	Finished time.Time `json:"finished,omitzero"`
}

// TaskCounts are a store's tasks by state.
type TaskCounts struct {
	Queued  int `json:"queued"`
	Running int `json:"running"`
	Done    int `json:"done"`
	Dead    int `json:"dead"`
}

// Pending is what counts against max_tasks and in the status object's
// `tasks`: queued and running tasks.
func (c TaskCounts) Pending() int { return c.Queued + c.Running }

// TaskDelivery is the `task` line a subscriber that asked for tasks gets:
// run this one, then answer done or failed.
type TaskDelivery struct {
	Type     string          `json:"type"` // "task"
	Ticket   string          `json:"ticket"`
	Tool     string          `json:"tool"`
	Priority string          `json:"priority"`
	Bytes    uint64          `json:"bytes"`
	Payload  json.RawMessage `json:"payload"`
	Lease    string          `json:"lease"`
	Attempt  int             `json:"attempt"`
}
