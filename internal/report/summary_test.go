package report

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func ip(i int) *int { return &i }

func start(s int, profile string, level, restarts int) api.Event {
	return api.Event{Time: at(s), Event: api.EventStart, Profile: profile, Level: level, Restarts: restarts}
}

func exit(s int, profile string, level int) api.Event {
	return api.Event{Time: at(s), Event: api.EventExit, Profile: profile, Level: level}
}

func step(s int, event, reason, from string, fl int, to string, tl int) api.Event {
	return api.Event{Time: at(s), Event: event, Reason: reason, Profile: from, Level: fl,
		From: from, To: to, FromLevel: ip(fl), ToLevel: ip(tl)}
}

func restart(s int, reason, from string, fl int, to string, tl int) api.Event {
	return step(s, api.EventRestart, reason, from, fl, to, tl)
}

func withDetail(ev api.Event, detail string) api.Event {
	ev.Detail = detail
	return ev
}

func oom(s int, profile string, level int, stderr ...string) api.Event {
	return api.Event{Time: at(s), Event: api.EventOOM, Profile: profile, Level: level,
		Detail: "stderr matched a pattern", Stderr: stderr}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name   string
		events []api.Event
		since  time.Time
		now    time.Time
		live   bool

		seconds      map[string]float64
		fallbackRate float64
		stepdowns    int
		oomFallbacks int
		restarts     map[string]int
		first        string
		messages     []Message
	}{
		{
			name:    "empty journal",
			now:     at(100),
			seconds: map[string]float64{},
		},
		{
			name: "live step-down, ended by exit, not live",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				step(100, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
				exit(300, "int8", 1),
			},
			now:          at(1000),
			seconds:      map[string]float64{"fp16": 100, "int8": 200},
			fallbackRate: 200.0 / 300,
			stepdowns:    1,
			first:        "fp16",
		},
		{
			name:    "live instance runs on until now",
			events:  []api.Event{start(0, "fp16", 0, 0)},
			now:     at(60),
			live:    true,
			seconds: map[string]float64{"fp16": 60},
			first:   "fp16",
		},
		{
			name: "not live: the summary ends at the last event",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				{Time: at(40), Event: api.EventAdmission, Decision: "gpu"},
			},
			now:     at(1000),
			seconds: map[string]float64{"fp16": 40},
			first:   "fp16",
		},
		{
			name: "OOM falls back one profile; backoff is not supervised time",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				exit(50, "fp16", 0),
				oom(50, "fp16", 0, "Traceback (most recent call last):",
					"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "  "),
				restart(50, api.ReasonOOM, "fp16", 0, "int8", 1),
				start(52, "int8", 1, 1),
				exit(100, "int8", 1),
			},
			now:          at(100),
			seconds:      map[string]float64{"fp16": 50, "int8": 48},
			fallbackRate: 48.0 / 98,
			oomFallbacks: 1,
			restarts:     map[string]int{"oom": 1},
			first:        "fp16",
			messages:     []Message{{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 1}},
		},
		{
			name: "OOM at the last profile restarts in place: not a fallback",
			events: []api.Event{
				start(0, "int4", 2, 0),
				exit(10, "int4", 2),
				withDetail(restart(10, api.ReasonOOM, "int4", 2, "int4", 2), "stderr matched a pattern"),
				start(11, "int4", 2, 1),
				exit(20, "int4", 2),
			},
			now:      at(20),
			seconds:  map[string]float64{"int4": 19},
			restarts: map[string]int{"oom": 1},
			first:    "int4",
			messages: []Message{{"stderr matched a pattern", 1}},
		},
		{
			name: "crash restarts in the same profile",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				exit(30, "fp16", 0),
				restart(30, api.ReasonCrash, "fp16", 0, "fp16", 0),
				start(31, "fp16", 0, 1),
				exit(40, "fp16", 0),
			},
			now:      at(40),
			seconds:  map[string]float64{"fp16": 39},
			restarts: map[string]int{"crash": 1},
			first:    "fp16",
		},
		{
			name: "a start with no exit before it: the gap is unknown, not counted",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				step(10, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
				// gpuguard was killed -9 here; a new run starts later.
				start(1000, "fp16", 0, 0),
				exit(1010, "fp16", 0),
			},
			now:          at(2000),
			seconds:      map[string]float64{"fp16": 20},
			fallbackRate: 0,
			stepdowns:    1,
			first:        "fp16",
		},
		{
			name: "window: state carried in, counts only inside",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				step(10, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
				step(150, api.EventStepUp, api.ReasonRecovered, "int8", 1, "fp16", 0),
			},
			since:        at(100),
			now:          at(200),
			live:         true,
			seconds:      map[string]float64{"int8": 50, "fp16": 50},
			fallbackRate: 0.5,
			first:        "fp16",
		},
		{
			name: "started below the best profile: the baseline is the first start",
			events: []api.Event{
				start(0, "int8", 1, 0),
				exit(100, "int8", 1),
			},
			now:     at(100),
			seconds: map[string]float64{"int8": 100},
			first:   "int8",
		},
		{
			name: "OOM messages grouped across differing numbers; restart evidence used without an oom event",
			events: []api.Event{
				start(0, "fp16", 0, 0),
				exit(10, "fp16", 0),
				oom(10, "fp16", 0, "CUDA out of memory. Tried to allocate 2.00 GiB"),
				restart(10, api.ReasonOOM, "fp16", 0, "int8", 1),
				start(11, "int8", 1, 1),
				exit(20, "int8", 1),
				oom(20, "int8", 1, "CUDA out of memory. Tried to allocate 1.50 GiB"),
				restart(20, api.ReasonOOM, "int8", 1, "int4", 2),
				start(21, "int4", 2, 2),
				exit(30, "int4", 2),
				{Time: at(30), Event: api.EventRestart, Reason: api.ReasonOOM, From: "int4", To: "int4",
					Detail: "exit code 137 in [oom] exit_codes"},
			},
			now:          at(30),
			seconds:      map[string]float64{"fp16": 10, "int8": 9, "int4": 9},
			fallbackRate: 18.0 / 28,
			oomFallbacks: 2,
			restarts:     map[string]int{"oom": 3},
			first:        "fp16",
			messages: []Message{
				{"CUDA out of memory. Tried to allocate 2.00 GiB", 2},
				{"exit code 137 in [oom] exit_codes", 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SummarizeSince(tt.events, tt.since, tt.now, tt.live)
			if !maps.Equal(s.SecondsInProfile, tt.seconds) {
				t.Errorf("seconds_in_profile = %v, want %v", s.SecondsInProfile, tt.seconds)
			}
			if d := s.FallbackRate - tt.fallbackRate; d > 1e-9 || d < -1e-9 {
				t.Errorf("fallback_rate = %v, want %v", s.FallbackRate, tt.fallbackRate)
			}
			if s.Stepdowns != tt.stepdowns {
				t.Errorf("stepdowns = %d, want %d", s.Stepdowns, tt.stepdowns)
			}
			if s.OOMFallbacks != tt.oomFallbacks {
				t.Errorf("oom_fallbacks = %d, want %d", s.OOMFallbacks, tt.oomFallbacks)
			}
			want := map[string]int{"oom": 0, "crash": 0, "watermark": 0}
			maps.Copy(want, tt.restarts)
			if !maps.Equal(s.Restarts, want) {
				t.Errorf("restarts = %v, want %v", s.Restarts, want)
			}
			if s.FirstProfile != tt.first {
				t.Errorf("first_profile = %q, want %q", s.FirstProfile, tt.first)
			}
			if !slices.Equal(s.TopOOMMessages, tt.messages) && (len(tt.messages) > 0 || len(s.TopOOMMessages) > 0) {
				t.Errorf("top_oom_messages = %v, want %v", s.TopOOMMessages, tt.messages)
			}
		})
	}
}

func TestSummarizeWindowBounds(t *testing.T) {
	evs := []api.Event{start(10, "fp16", 0, 0), exit(50, "fp16", 0)}
	s := Summarize(evs, at(100), false)
	if !s.Since.Equal(at(10)) || !s.Until.Equal(at(50)) {
		t.Errorf("not live: window %v..%v, want first..last event", s.Since, s.Until)
	}
	s = SummarizeSince(evs, at(20), at(100), true)
	if !s.Since.Equal(at(20)) || !s.Until.Equal(at(100)) {
		t.Errorf("live with since: window %v..%v, want since..now", s.Since, s.Until)
	}
	if s.Events != 1 {
		t.Errorf("events in window = %d, want 1", s.Events)
	}
}

func TestJSONHasContractKeys(t *testing.T) {
	b, err := json.Marshal(Summarize([]api.Event{start(0, "fp16", 0, 0)}, at(10), true))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"stepdowns", "oom_fallbacks", "restarts", "seconds_in_profile",
		"fallback_rate", "degraded_rate", "budget", "over_budget", "top_oom_messages", "since", "until", "skipped_lines"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q: %s", k, b)
		}
	}
	if _, ok := m["restarts"].(map[string]any); !ok {
		t.Errorf("restarts is not an object: %s", b)
	}
}

func TestWriteText(t *testing.T) {
	evs := []api.Event{
		start(0, "fp16", 0, 0),
		step(90, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
		exit(100, "int8", 1),
	}
	s := Summarize(evs, at(100), false)
	s.Name, s.SkippedLines = "llama", 2
	var buf bytes.Buffer
	if err := s.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"llama (not running)", "stepdowns      1 (watermark 1)",
		"fp16", "int8", "fallback rate  10.0% of supervised time below fp16",
		"degraded rate  10.0% of supervised time below fp16 (the ladder's first profile; budget 5.0%)",
		"skipped 2 unreadable journal line(s)", "warning: llama ran below its best profile fp16 10.0% of the time (budget 5.0%), mostly in int8",
		"raise the GPU memory budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "fp16 ") > strings.Index(out, "int8 ") {
		t.Errorf("profiles not in ladder order:\n%s", out)
	}

	s = Summarize([]api.Event{start(0, "fp16", 0, 0)}, at(100), true)
	buf.Reset()
	s.WriteText(&buf)
	if strings.Contains(buf.String(), "warning") || strings.Contains(buf.String(), "skipped") {
		t.Errorf("a healthy instance got a warning:\n%s", buf.String())
	}
}

// TestYields: yields are counted, by tenant, in the window, and printed.
func TestYields(t *testing.T) {
	yield := func(s int, to string) api.Event {
		return api.Event{Time: at(s), Event: api.EventYield, Profile: "fp16", To: to, GPU: "GPU-a", Reason: api.ReasonWatermark}
	}
	evs := []api.Event{start(0, "fp16", 0, 0), yield(5, "batch"), yield(20, "batch"), yield(30, "embed"), yield(40, "")}
	s := SummarizeSince(evs, at(10), at(50), true)
	if s.Yields != 3 || !maps.Equal(s.YieldsTo, map[string]int{"batch": 1, "embed": 1, "unknown": 1}) {
		t.Errorf("yields %d %v, want 3 in the window (batch 1, embed 1, unknown 1)", s.Yields, s.YieldsTo)
	}
	var buf bytes.Buffer
	s.WriteText(&buf)
	if !strings.Contains(buf.String(), "yields         3 to other tenants of a shared GPU (batch 1, embed 1, unknown 1)") {
		t.Errorf("text:\n%s", buf.String())
	}
	b, _ := json.Marshal(Summarize([]api.Event{start(0, "fp16", 0, 0)}, at(10), true))
	if !strings.Contains(string(b), `"yields":0,"yields_to":{}`) {
		t.Errorf("JSON without yields: %s", b)
	}
	buf.Reset()
	Summarize([]api.Event{start(0, "fp16", 0, 0)}, at(10), true).WriteText(&buf)
	if strings.Contains(buf.String(), "yields") {
		t.Errorf("an instance that never yielded mentions yields:\n%s", buf.String())
	}
}

// TestWriteAll: one instance is one JSON object, several are wrapped in
// "instances"; text separates them with a blank line.
func TestWriteAll(t *testing.T) {
	a, b := Summary{Name: "a"}, Summary{Name: "b"}
	var one, two, text bytes.Buffer
	if err := WriteAll(&one, []Summary{a}, true); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(&two, []Summary{a, b}, true); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(&text, []Summary{a, b}, false); err != nil {
		t.Fatal(err)
	}
	var single map[string]any
	var several struct{ Instances []map[string]any }
	if json.Unmarshal(one.Bytes(), &single) != nil || single["name"] != "a" {
		t.Errorf("one instance: %s", one.String())
	}
	if json.Unmarshal(two.Bytes(), &several) != nil || len(several.Instances) != 2 || several.Instances[1]["name"] != "b" {
		t.Errorf("two instances: %s", two.String())
	}
	ia, ib := strings.Index(text.String(), "a ("), strings.Index(text.String(), "\n\nb (")
	if ia != 0 || ib < 0 {
		t.Errorf("text: %q", text.String())
	}
}

// TestWriteTextEscapes: what the journal holds (a child's OOM message, a
// profile name) is printed with its control characters escaped.
func TestWriteTextEscapes(t *testing.T) {
	evs := []api.Event{start(0, "fp\x1b[2J16", 0, 0), exit(100, "fp\x1b[2J16", 0)}
	s := Summarize(evs, at(100), false)
	s.TopOOMMessages = []Message{{Message: "CUDA out of memory\a\x1b]0;x\a", Count: 1}}
	var buf bytes.Buffer
	if err := s.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\a") {
		t.Errorf("a control character printed raw:\n%q", out)
	}
	for _, want := range []string{`CUDA out of memory\a\x1b]0;x\a`, `fp\x1b[2J16`} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %s:\n%s", want, out)
		}
	}
}
