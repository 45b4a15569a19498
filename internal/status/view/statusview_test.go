package view

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

const gib = 1 << 30

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func demo() api.Status {
	return api.Status{
		Name: "llama", PID: 1200, ChildPID: 1201, State: api.StateRunning,
		Profile: "int8", Level: 1, Levels: 3, Watermark: 0.75, Restarts: 2, UptimeSeconds: 3725,
		IntervalSeconds: 0.05, ETASeconds: ptr(42.7), Ready: true, Held: 2,
		GPUs: []api.GPU{{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", UsedBytes: 30 * gib, TotalBytes: 40 * gib,
			Processes: []api.GPUProcess{{PID: 1201, UsedBytes: 28 * gib}, {PID: 999, UsedBytes: 2 * gib}}}},
		LastEvent: &api.Event{Time: now.Add(-12 * time.Second), Event: "stepdown", Profile: "int8", Reason: "watermark"},
	}
}

func ptr[T any](v T) *T { return &v }

func TestWriteTable(t *testing.T) {
	unreachable := api.Status{Name: "qwen", PID: 77, State: api.StateUnreachable, Error: "no answer within 1s"}
	tests := []struct {
		name  string
		r     Report
		color bool
		want  string
	}{
		{
			name: "nothing running",
			want: "No running instances.\n\nNo GPUs.\n",
		},
		{
			name: "one instance and its GPU",
			r:    Report{Instances: []api.Status{demo()}, GPUs: WithTenants(demo().GPUs, []api.Status{demo()})},
			want: `NAME   PID   PRIO  PROFILE     GPU MEM        WATERMARK  POLL  ETA  RESTARTS  UPTIME  STATE    READY         LAST EVENT
llama  1200  0     int8 (1/3)  30.0/40.0 GiB  0.75       50ms  42s  2         1h02m   running  yes (2 held)  stepdown int8 (watermark) 12s ago

GPU  NAME         MEMORY              TENANTS  PROCESSES
0    NVIDIA H200  30.0/40.0 GiB  75%  llama    1201 llama 28.0 GiB, 999 2.0 GiB
`,
		},
		{
			name: "unreachable instance, observe mode, no GPUs",
			r: Report{Instances: []api.Status{
				{Name: "a", PID: 1, Priority: -5, State: api.StateBackoff, Profile: "fp16", Levels: 1, Observe: true, UptimeSeconds: 59, IntervalSeconds: 1},
				unreachable,
			}},
			want: `NAME  PID  PRIO  PROFILE     GPU MEM  WATERMARK  POLL  ETA  RESTARTS  UPTIME  STATE              READY  LAST EVENT
a     1    -5    fp16 (0/1)  -        0.00       1s    -    0         59s     backoff (observe)  no     -
qwen  77   -     -           -        -          -     -    -         -       unreachable        -      no answer within 1s

No GPUs.
`,
		},
		{
			name: "asleep for a peer",
			r: Report{Instances: []api.Status{
				{Name: "coder", PID: 3, State: api.StateAsleep, Profile: "asleep", Level: 1, Levels: 2, UptimeSeconds: 59, IntervalSeconds: 1,
					RoomFor: new("chat")},
			}},
			want: `NAME   PID  PRIO  PROFILE       GPU MEM  WATERMARK  POLL  ETA  RESTARTS  UPTIME  STATE                READY  LAST EVENT
coder  3    0     asleep (1/2)  -        0.00       1s    -    0         59s     asleep (room: chat)  no     -

No GPUs.
`,
		},
		{
			name:  "colours wrap the text, not the padding",
			r:     Report{Instances: []api.Status{unreachable}},
			color: true,
			want: "\x1b[1mNAME\x1b[0m  \x1b[1mPID\x1b[0m  \x1b[1mPRIO\x1b[0m  \x1b[1mPROFILE\x1b[0m  \x1b[1mGPU MEM\x1b[0m  \x1b[1mWATERMARK\x1b[0m  " +
				"\x1b[1mPOLL\x1b[0m  \x1b[1mETA\x1b[0m  " +
				"\x1b[1mRESTARTS\x1b[0m  \x1b[1mUPTIME\x1b[0m  \x1b[1mSTATE\x1b[0m        \x1b[1mREADY\x1b[0m  \x1b[1mLAST EVENT\x1b[0m\n" +
				"qwen  77   -     -        -        -          -     -    -         -       \x1b[31munreachable\x1b[0m  -      \x1b[2mno answer within 1s\x1b[0m\n" +
				"\nNo GPUs.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteTable(&b, tt.r, Options{Now: now, Color: tt.color}); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s\n(got %q)", b.String(), tt.want, b.String())
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{Duration(0), "0s"}, {Duration(59.9), "59s"}, {Duration(60), "1m00s"}, {Duration(3599), "59m59s"},
		{Duration(3600), "1h00m"}, {Duration(86400 + 4*3600), "1d04h"}, {Duration(-1), "-"},
		{UsedOfTotal(30*gib, 40*gib), "30.0/40.0 GiB"}, {UsedOfTotal(512<<20, 16*gib), "0.5/16.0 GiB"},
		{UsedOfTotal(0, 0), "0.0/0.0 B"}, {bytesText(100), "100 B"}, {bytesText(1536 << 20), "1.5 GiB"},
		{LastEvent(nil, now), "-"},
		{Period(0.2), "200ms"}, {Period(1), "1s"}, {Period(0.02), "20ms"}, {Period(0), "-"},
		{ETA(nil), "-"}, {ETA(ptr(4.25)), "4.2s"}, {ETA(ptr(-1.0)), "0.0s"}, {ETA(ptr(75.0)), "1m15s"},
		{LastEvent(&api.Event{Event: "oom", Profile: "fp16", Detail: "CUDA out of memory", Time: now.Add(-90 * time.Second)}, now), "oom fp16 (CUDA out of memory) 1m30s ago"},
		{LastEvent(&api.Event{Event: "start", Profile: "fp16", Time: now.Add(time.Second)}, now), "start fp16 0s ago"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestUnionGPUs(t *testing.T) {
	a := api.Status{GPUs: []api.GPU{{Index: 1, UUID: "GPU-b", UsedBytes: 1}, {Index: 0, UUID: "GPU-a", UsedBytes: 1}}}
	b := api.Status{GPUs: []api.GPU{{Index: 1, UUID: "GPU-b", UsedBytes: 2}, {Index: 2, UUID: "GPU-c"}}}
	sim := api.Status{GPUs: []api.GPU{{Index: 0}, {Index: 0}}}
	got := UnionGPUs([]api.Status{a, b, sim, {State: api.StateUnreachable}})
	var ids []string
	for _, g := range got {
		ids = append(ids, g.UUID)
	}
	if strings.Join(ids, ",") != ",GPU-a,GPU-b,GPU-c" || got[2].UsedBytes != 1 {
		t.Errorf("UnionGPUs = %+v", got)
	}
	if g := UnionGPUs(nil); g == nil || len(g) != 0 {
		t.Errorf("UnionGPUs(nil) = %#v, want empty", g)
	}
}

func TestWithTenants(t *testing.T) {
	st := func(name string, prio int, state string, gpus ...api.GPU) api.Status {
		return api.Status{Name: name, Priority: prio, State: state, GPUs: gpus}
	}
	a, b, c := api.GPU{Index: 0, UUID: "GPU-a"}, api.GPU{Index: 1, UUID: "GPU-b"}, api.GPU{Index: 5, UUID: "GPU-c"}
	noUUID := api.GPU{Index: 3}
	sts := []api.Status{
		st("llm", 10, api.StateRunning, a),
		st("batch", -5, api.StateRunning, a, b),
		st("embed", 0, api.StateWaiting, a),
		st("zeta", 0, api.StateRunning, a),
		st("alpha", 0, api.StateRunning, a),
		st("gone", -100, api.StateUnreachable, a),
		st("sim", 0, api.StateRunning, noUUID),
		st("other-sim", 0, api.StateRunning, api.GPU{Index: 3, UUID: "GPU-x"}),
	}
	got := WithTenants([]api.GPU{a, b, c, noUUID}, sts)
	want := [][]string{
		{"batch", "alpha", "embed", "zeta", "llm"}, // lowest priority first, ties by name
		{"batch"},
		{}, // nobody: an empty list, not null
		{"sim"},
	}
	for i, g := range got {
		if g.Tenants == nil || strings.Join(g.Tenants, ",") != strings.Join(want[i], ",") {
			t.Errorf("GPU %s: tenants %#v, want %v", g.UUID, g.Tenants, want[i])
		}
	}
	if sts[0].GPUs[0].Tenants != nil {
		t.Error("WithTenants changed the instances' own GPUs")
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, Report{Instances: []api.Status{{Name: "x", State: api.StateUnreachable}}}, true); err != nil {
		t.Fatal(err)
	}
	want := `{"instances":[{"name":"x","pid":0,"child_pid":0,"state":"unreachable","profile":"","level":0,"levels":0,"priority":0,"watermark":0,"interval_seconds":0,"eta_seconds":null,"restarts":0,"uptime_seconds":0,"child_uptime_seconds":0,"observe":false,"gpus":[],"leases":0,"ready":false,"held":0,"tasks":0,"in_flight":0,"idle_seconds":null,"room_for":null,"last_event":null,"fit":null}],"gpus":[]}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
	b.Reset()
	WriteJSON(&b, Report{Instances: []api.Status{demo()}, GPUs: demo().GPUs}, true)
	if out := b.String(); !strings.Contains(out, `"total_bytes":42949672960,"processes":[{"pid":1201,"used_bytes":30064771072},{"pid":999,"used_bytes":2147483648}]}],"leases"`) ||
		!strings.Contains(out, `],"gpus":[{"index":0,"uuid":"GPU-a",`) || !strings.HasSuffix(out, `,"tenants":[]}]}`+"\n") {
		t.Errorf("an instance's gpus have no tenants, the top-level ones always: %s", out)
	}
	b.Reset()
	WriteJSON(&b, Report{}, false)
	var r map[string]any
	if err := json.Unmarshal(b.Bytes(), &r); err != nil || !strings.Contains(b.String(), "\n  \"gpus\": []") {
		t.Errorf("indented: %s (%v)", b.String(), err)
	}
}

func TestETAWithinAMinuteIsRed(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, Report{Instances: []api.Status{demo()}}, Options{Now: now, Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\x1b[31m42s\x1b[0m") {
		t.Errorf("an ETA of 42.7s is not red:\n%q", b.String())
	}
}

// TestWriteTableEscapes: a last event's reason and an unreachable
// instance's error are shown with their control characters escaped, and
// the columns stay aligned by the escaped text.
func TestWriteTableEscapes(t *testing.T) {
	st := demo()
	st.LastEvent = &api.Event{Event: "task_dead", Detail: "answered 500 /\x1b[2J\a"}
	bad := api.Status{Name: "q", PID: 7, State: api.StateUnreachable, Error: "no\x1b]0;x\a answer"}
	var buf bytes.Buffer
	if err := WriteTable(&buf, Report{Instances: []api.Status{st, bad}}, Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\a") {
		t.Errorf("a control character printed raw:\n%q", out)
	}
	for _, want := range []string{`task_dead (answered 500 /\x1b[2J\a)`, `no\x1b]0;x\a answer`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
	// With colour, the colours are the table's own escapes, around escaped text.
	buf.Reset()
	WriteTable(&buf, Report{Instances: []api.Status{bad}}, Options{Now: now, Color: true})
	if !strings.Contains(buf.String(), "\x1b[31munreachable\x1b[0m") || strings.Contains(buf.String(), "\x1b]0") {
		t.Errorf("coloured table:\n%q", buf.String())
	}
}
