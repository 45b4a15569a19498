package report

import (
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Tasks are the deferred-task figures of a report's window.
type Tasks struct {
	Deferred int `json:"deferred"`
	Done     int `json:"done"`
	Dead     int `json:"dead"`
	// MedianWaitSeconds is the median time from deferral to delivery of
	// the deliveries in the window whose lines the journal still holds
	// (null when none).
	MedianWaitSeconds *float64 `json:"median_wait_seconds"`
}

// fillTasks counts from the window's account (kept across rotations) and
// takes the waits from the lines.
func (s *Summary) fillTasks(win api.Totals, events []api.Event, since time.Time) {
	s.Tasks = Tasks{Deferred: win.Events[api.EventDeferred], Done: win.Events[api.EventTaskDone], Dead: win.Events[api.EventTaskDead]}
	var waits []float64
	for _, ev := range events {
		if ev.Event == api.EventTask && !ev.Time.Before(since) {
			waits = append(waits, ev.WaitSeconds)
		}
	}
	if len(waits) == 0 {
		return
	}
	slices.Sort(waits)
	m := waits[len(waits)/2]
	if len(waits)%2 == 0 {
		m = (waits[len(waits)/2-1] + m) / 2
	}
	s.Tasks.MedianWaitSeconds = &m
}
