package bench

import (
	"context"
	"flag"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/journal"
)

var (
	socketN = flag.Int("socket.n", 1000, "socket: status round trips and socket steps measured")
	stepCLI = flag.Int("socket.cli", 50, "socket: `gpuguard step` commands measured")
)

// twoLive is a ladder of two live profiles that never moves by itself
// (nothing is above high, recover_after = 0): only manual steps move it.
const twoLive = `[watch]
interval = "200ms"
[watermark]
recover_after = "0s"
[[profile]]
name = "a"
live = true
[[profile]]
name = "b"
live = true
`

// BenchmarkSocket measures the real binary's control socket with an idle
// child (benchchild idle, which ignores the notify signal):
//
//   - status: one status request and reply on an open connection
//     (target: median <= 1 ms);
//   - step: the decision (the stepdown/stepup event's time in the journal,
//     taken when the loop handles the request) -> a subscriber on the
//     instance's socket has the profile event (target: median <= 2 ms);
//     step-req is the same from the moment the step request is written;
//   - step-cli: `gpuguard step NAME down|up` started -> the subscriber has
//     the event (includes exec of the CLI and its dial).
//
// Steps alternate down and up, so the ladder never runs out.
func BenchmarkSocket(b *testing.B) {
	defer reportLoad(b)()
	var status, decided, requested, cli []time.Duration
	for b.Loop() {
		s := newSandbox(b)
		g := s.start("sock", s.policy("sock", twoLive), nil, childBin, "idle")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := g.running(ctx)
		defer c.Close()

		status = status[:0]
		for range *socketN {
			t0 := time.Now()
			if _, err := c.Status(ctx); err != nil {
				b.Fatal(err)
			}
			status = append(status, time.Since(t0))
		}

		events, err := c.Subscribe(ctx)
		if err != nil {
			b.Fatal(err)
		}
		dirs := [2]string{"down", "up"}
		var sent, got []time.Time
		requested = requested[:0]
		for i := range *socketN {
			t0 := time.Now()
			if _, err := c.Step(ctx, dirs[i%2]); err != nil {
				b.Fatalf("step %d: %v; stderr:\n%s", i, err, g.stderr.Tail(4096))
			}
			ev := <-events
			t1 := time.Now()
			if want := "ab"[(i+1)%2 : (i+1)%2+1]; ev.Profile != want {
				b.Fatalf("step %d: event for profile %q, want %q", i, ev.Profile, want)
			}
			sent, got = append(sent, t0), append(got, t1)
			requested = append(requested, t1.Sub(t0))
		}
		cli = cli[:0]
		for i := range *stepCLI {
			cmd := exec.Command(bin, "step", g.name, dirs[i%2], "--runtime-dir", s.runDir)
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("gpuguard step: %v: %s", err, out)
			}
			<-events
			t1 := time.Now()
			cli = append(cli, t1.Sub(t0))
			sent, got = append(sent, t0), append(got, t1)
		}
		g.stop()

		// The journal's step events, in order, one per step above.
		evs, _, err := journal.Read(filepath.Join(g.stateDir, "events.jsonl"), time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		decided = decided[:0]
		k := 0
		for _, ev := range evs {
			if ev.Event != api.EventStepDown && ev.Event != api.EventStepUp {
				continue
			}
			if k < len(got) && !ev.Time.Before(sent[k]) {
				decided = append(decided, got[k].Sub(ev.Time))
			}
			k++
		}
		if k != len(got) {
			b.Fatalf("journal has %d step events, want %d", k, len(got))
		}
	}
	stats(b, "status-", "us", status)
	stats(b, "step-", "us", decided)
	stats(b, "step-req-", "us", requested)
	stats(b, "step-cli-", "ms", cli)
}
