package review

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// describe is a mark's title: what happened, in which profile, and when.
func describe(ev api.Event, loc *time.Location) string {
	var what string
	switch ev.Event {
	case api.EventStepDown:
		what = fmt.Sprintf("step down (%s) %s", orUnknown(ev.Reason), move(ev))
		if ev.Watermark > 0 {
			what += fmt.Sprintf(", watermark %.2f", ev.Watermark)
		}
	case api.EventStepUp:
		what = fmt.Sprintf("step up (%s) %s", orUnknown(ev.Reason), move(ev))
	case api.EventOOM:
		what = "OOM exit in " + ev.Profile
	case api.EventRestart:
		what = fmt.Sprintf("restart (%s) %s", orUnknown(ev.Reason), move(ev))
	case api.EventYield:
		what = fmt.Sprintf("yield to %s on %s", orUnknown(ev.To), ev.GPU)
	case api.EventGPUFault:
		what = fmt.Sprintf("GPU fault: Xid %d on %s", ev.Xid, ev.GPU)
	case api.EventReload:
		switch {
		case ev.Reason == api.ReasonError:
			what = "reload refused (nothing changed)"
		case len(ev.Changed) == 0:
			what = "reload (nothing changed)"
		default:
			what = "reload: " + strings.Join(ev.Changed, ", ")
		}
	case api.EventGiveUp:
		what = "give-up"
		if ev.Reason != "" {
			what += " (" + ev.Reason + ")"
		}
	}
	what += " at " + fmtTime(ev.Time, loc)
	if d := firstLine(ev.Detail); d != "" && ev.Event != api.EventStepDown && ev.Event != api.EventStepUp {
		what += ": " + clip(d, 120)
	}
	return what
}

// move is "fp16 → int8", or the profile alone when it did not change.
func move(ev api.Event) string {
	from := ev.From
	if from == "" {
		from = ev.Profile
	}
	if ev.To == "" || ev.To == from {
		return "in " + from
	}
	return from + " → " + ev.To
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
