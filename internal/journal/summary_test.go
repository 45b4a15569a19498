package journal

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// memEvents parses every line of a memFS file.
func memEvents(t *testing.T, m *memFS, name string) []api.Event {
	t.Helper()
	f := m.file(name)
	if f == nil {
		t.Fatalf("%s does not exist", name)
	}
	var out []api.Event
	for _, l := range strings.Split(strings.TrimSpace(string(f.bytes())), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, ev)
	}
	return out
}

func grant(prio, tool string, bytes uint64) api.Event {
	return api.Event{Time: time.Now(), Name: "llama", Event: api.EventAdmission, Profile: "fp16",
		Decision: "gpu", Priority: prio, Tool: tool, Bytes: bytes, Lease: "l1"}
}

func now(event string) api.Event {
	return api.Event{Time: time.Now(), Name: "llama", Event: event, Profile: "fp16"}
}

// kinds renders the lines as "event" or "admission×count".
func kinds(evs []api.Event) string {
	var parts []string
	for _, ev := range evs {
		s := ev.Event
		if ev.Event == api.EventAdmission {
			s += ":" + ev.Decision
			if ev.Count > 0 {
				s += "×" + strconv.Itoa(ev.Count)
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// TestGrantedAdmissionsSummarised: granted admissions become one line when
// their second ends, after the other lines of that second and before the
// lines of later seconds; other decisions and state changes keep their own
// lines; Close writes the pending summary.
func TestGrantedAdmissionsSummarised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{})
		start := time.Now() // synctest's clock starts on a whole second
		j.Observe(now(api.EventStart))
		j.Observe(grant("P0", "search", 100))
		j.Observe(grant("", "search", 200))
		time.Sleep(300 * time.Millisecond)
		deny := now(api.EventAdmission)
		deny.Decision, deny.Priority = "deny", "P0"
		j.Observe(deny)
		j.Observe(grant("P2", "", 300))
		j.Observe(now(api.EventStepDown))
		time.Sleep(time.Second) // the second ends: its line goes out
		j.Flush()
		evs := memEvents(t, m, path)
		if got, want := kinds(evs), "start admission:deny stepdown admission:gpu×3"; got != want {
			t.Fatalf("lines %q, want %q", got, want)
		}
		s := evs[3]
		if !s.Time.Equal(start.Add(time.Second)) || s.Bytes != 600 || s.Lease != "" || s.Name != "llama" || s.Profile != "fp16" {
			t.Errorf("summary %+v: want time = the second's end, bytes 600, no lease", s)
		}
		if want := map[string]int{"P0": 1, "P1": 1, "P2": 1}; !maps.Equal(s.ByPriority, want) {
			t.Errorf("by_priority %v, want %v (no priority is P1)", s.ByPriority, want)
		}
		if want := map[string]int{"search": 2, noTool: 1}; !maps.Equal(s.ByTool, want) {
			t.Errorf("by_tool %v, want %v", s.ByTool, want)
		}

		// A later event, timed after the second, pushes its summary out
		// first, before the timer would.
		time.Sleep(200 * time.Millisecond) // 1.5 s
		j.Observe(grant("P1", "a", 1))
		time.Sleep(time.Second) // 2.5 s: the line for second 1 is out
		j.Observe(grant("P1", "a", 1))
		j.Observe(grant("P1", "a", 1))
		j.Observe(now(api.EventExit)) // same second: before its summary
		time.Sleep(600 * time.Millisecond)
		j.Observe(grant("P1", "b", 1)) // 3.1 s: pending at Close
		j.Close()
		evs = memEvents(t, m, path)
		if got, want := kinds(evs[4:]), "admission:gpu×1 exit admission:gpu×2 admission:gpu×1"; got != want {
			t.Fatalf("later lines %q, want %q", got, want)
		}
		if !evs[5].Time.Before(evs[6].Time) || !evs[6].Time.Equal(start.Add(3*time.Second)) {
			t.Errorf("the summary of second 2 at %v after the exit at %v", evs[6].Time, evs[5].Time)
		}
		if closed := start.Add(3100 * time.Millisecond); !evs[7].Time.Equal(closed) {
			t.Errorf("the summary written at Close has time %v, want Close's %v", evs[7].Time, closed)
		}
	})
}

// TestAtMostOneAdmissionLineASecond: a stream of grants, with Flush calls
// and an admission arriving after its second's line was written, never
// gives two lines the same second, and loses no count.
func TestAtMostOneAdmissionLineASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{})
		const n = 20000
		for i := range n {
			j.Observe(grant("P1", "t", 1))
			if i%200 == 0 {
				j.Flush()
				time.Sleep(7 * time.Millisecond)
			}
		}
		time.Sleep(2 * time.Second)
		late := grant("P1", "t", 1)
		late.Time = late.Time.Add(-2500 * time.Millisecond) // second 0, whose line is out
		j.Observe(late)
		j.Close()
		evs := memEvents(t, m, path)
		seen := map[time.Time]bool{}
		total := 0
		for _, ev := range evs {
			sec := ev.Time.Add(-time.Nanosecond).Truncate(time.Second)
			if seen[sec] {
				t.Fatalf("two admission lines for the second %v", sec)
			}
			seen[sec] = true
			total += ev.Count
		}
		if total != n+1 || j.Dropped() != 0 {
			t.Errorf("summaries count %d (dropped %d), want %d", total, j.Dropped(), n+1)
		}
		if len(evs) != 2 || evs[1].Count != 1 {
			t.Errorf("lines %q, want the 0.7 s of grants, then the late one in the next second's line", kinds(evs))
		}
	})
}

func TestSummaryBoundsTools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{})
		long := strings.Repeat("é", 100) // 200 bytes
		untimed := grant("P1", long, 1)
		untimed.Time = time.Time{} // counted all the same, at the writer's time
		j.Observe(untimed)
		for i := range maxTools + 10 {
			j.Observe(grant("P1", "tool"+strconv.Itoa(i), 1))
		}
		j.Close()
		s := memEvents(t, m, path)[0]
		if len(s.ByTool) != maxTools+1 || s.ByTool[otherTool] != 11 {
			t.Errorf("%d tools, %d under %q; want %d and 11", len(s.ByTool), s.ByTool[otherTool], otherTool, maxTools+1)
		}
		if s.ByTool[strings.Repeat("é", maxToolName/2)] != 1 {
			t.Errorf("the long tool name was not cut to %d bytes on a rune boundary: %v", maxToolName, s.ByTool)
		}
	})
}
