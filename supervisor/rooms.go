package supervisor

// rooms are the rooms around the loop inside supervisor/: each holds its
// own state and does one job (docs/architecture.md lists them); the loop's
// goroutine owns them all, and reaches each through its field.
type rooms struct {
	pace   pacer         // sampling and its adaptive period (sense.go)
	health probeHealth   // a run of failed probe calls (probehealth.go)
	out    reporter      // events and the status line, outward (reporter.go)
	faults gpuFaults     // Xid events and the GPUs they left faulted
	minute minuteSummary // the watermark samples of this minute, for its record
	door   doorLink      // the front door (door.go)
	acts   actionState   // server actions (actions.go)
	wake   sleeper       // sleeping, waking on request, sleeping when idle (sleep.go, wake.go)
}
