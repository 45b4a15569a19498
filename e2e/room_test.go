package e2e

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Making room (docs/sharing.md): models that cannot all be awake at once
// share one sim GPU (16 GiB, 14.4 GiB under high), each a vLLM-sleep fake
// behind its own door, and a request for a sleeping one puts an idle
// neighbour to sleep.

// TestRoomForAWake: a request for the sleeping coder, whose 10 GiB do not
// fit beside the awake chat's 10 GiB, puts chat to sleep (reason room,
// for coder) and is answered 200 in well under hold; coder journals room
// (chat slept, the memory freed); chat's status says asleep (room:
// coder); and chat, asked for in its turn, makes room again.
func TestRoomForAWake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	coder, chat := e.startAsleepAwake("coder", bigModel(), "chat", bigModel())
	time.Sleep(time.Second) // chat's keep_awake (1s) from its first ready

	code, took := coder.get("")
	if code != 200 || took > 20*time.Second {
		t.Fatalf("request for the sleeping coder: %d after %s, want 200 well under hold (60s)", code, took)
	}
	downs := chat.roomDowns()
	if len(downs) != 1 || downs[0].For != "coder" || downs[0].To != "asleep" {
		t.Fatalf("chat's room step-downs %s, want one to asleep for coder", jsonOf(downs))
	}
	// The wake goes ahead as soon as the memory is free; the room event
	// follows once chat's sleep is done.
	waitFor(t, "coder's room event", 10*time.Second, func() bool { return len(coder.events(api.EventRoom)) > 0 })
	rooms := coder.events(api.EventRoom)
	if len(rooms) != 1 || !slices.Equal(rooms[0].Slept, []string{"chat"}) || rooms[0].FreedBytes == nil ||
		*rooms[0].FreedBytes < 8<<30 || rooms[0].GPU == "" {
		t.Fatalf("coder's room events %s, want chat slept and about 9 GiB freed", jsonOf(rooms))
	}
	if n := pfMetric(t, chat.metricsAt, `gpuguard_stepdowns_total{name="chat",reason="room"}`); n != 1 {
		t.Errorf(`chat's gpuguard_stepdowns_total{reason="room"} = %d, want 1`, n)
	}
	if n := pfMetric(t, coder.metricsAt, `gpuguard_room_seconds_count{name="coder"}`); n != 1 {
		t.Errorf("coder's gpuguard_room_seconds_count = %d, want 1", n)
	}
	st := chat.status()
	if st.State != api.StateAsleep || st.RoomFor == nil || *st.RoomFor != "coder" {
		t.Fatalf("chat: %s, room_for %v; want asleep for coder", st.State, st.RoomFor)
	}
	if code, out, _ := e.run([]string{"status", "--runtime-dir", e.runDir}); code != 0 || !strings.Contains(out, "asleep (room: coder)") {
		t.Errorf("status table does not say asleep (room: coder):\n%s", out)
	}
	// Taking turns: chat asked for makes room in its turn, once coder's
	// keep_awake has passed since its answer.
	if code, took := chat.get(""); code != 200 || took > 20*time.Second {
		t.Fatalf("request for chat in its turn: %d after %s", code, took)
	}
	if downs := coder.roomDowns(); len(downs) != 1 || downs[0].For != "chat" {
		t.Fatalf("coder's room step-downs %s, want one for chat", jsonOf(downs))
	}
	if st := chat.status(); st.RoomFor != nil || st.State != api.StateRunning {
		t.Errorf("chat after its wake: %s, room_for %v", st.State, st.RoomFor)
	}
	coder.stop()
	chat.stop()
}

// TestRoomNeverABusyPeer: while chat streams an answer (5 s), a request
// for the sleeping coder does not put it to sleep, though its keep_awake
// is 0: coder journals no_room and waits; chat's stream is answered
// whole; only after it does chat sleep for coder, whose request is then
// answered.
func TestRoomNeverABusyPeer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := bigModel()
	o.keepAwake = "0s"
	coder, chat := e.startAsleepAwake("coder", bigModel(), "chat", o)
	var wg sync.WaitGroup
	var streamCode int
	// The stream lasts 5 s from its arrival at chat, which is after this:
	// chat's answer cannot end before then. (When the client reads its
	// end is no measure: on a loaded machine that lags the door's end.)
	streamSent := time.Now()
	wg.Go(func() { streamCode, _ = chat.get("seconds=5") })
	waitFor(t, "chat's stream in flight", 10*time.Second, func() bool { return chat.status().InFlight == 1 })
	code, took := coder.get("")
	wg.Wait()
	if streamCode != 200 {
		t.Fatalf("chat's stream: %d, want 200 (answered whole)", streamCode)
	}
	if code != 200 {
		t.Fatalf("coder's request: %d after %s, want 200 once chat was idle", code, took)
	}
	downs := chat.roomDowns()
	if streamEnd := streamSent.Add(5 * time.Second); len(downs) != 1 || downs[0].Time.Before(streamEnd) {
		t.Fatalf("chat's room step-downs %s, stream ended after %s: chat slept while its stream was in flight", jsonOf(downs), streamEnd)
	}
	noRoom := coder.events(api.EventNoRoom)
	if len(noRoom) != 1 || noRoom[0].NeedBytes != 10<<30 || noRoom[0].CouldFreeBytes == nil || *noRoom[0].CouldFreeBytes != 0 {
		t.Fatalf("coder's no_room events %s, want one: 10 GiB needed, nothing the idle peers could free", jsonOf(noRoom))
	}
	coder.stop()
	chat.stop()
}

// TestRoomNeverAHigherPriority: chat (priority 10) is idle, but never put
// to sleep for the coder (priority 0): coder's request waits out hold
// and gets 503, as it would without make_room, and journals no_room.
func TestRoomNeverAHigherPriority(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	high := bigModel()
	high.prio = 10
	coder, chat := e.roomRefused(t, bigModel(), high)
	if st := chat.status().State; st != api.StateRunning {
		t.Fatalf("the higher-priority chat is %s, want running", st)
	}
	if n := coder.events(api.EventNoRoom); len(n) != 1 {
		t.Fatalf("coder's no_room events %s, want one", jsonOf(n))
	}
	coder.stop()
	chat.stop()
}

// TestRoomMakeRoomOff: with make_room = false nothing changes: coder's
// request waits out hold and gets 503, nobody is asked, no room or
// no_room is journaled.
func TestRoomMakeRoomOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := bigModel()
	o.serve = "make_room = false"
	coder, chat := e.roomRefused(t, o, bigModel())
	if r, n := coder.events(api.EventRoom), coder.events(api.EventNoRoom); len(r) != 0 || len(n) != 0 {
		t.Fatalf("make_room = false journaled room %s, no_room %s", jsonOf(r), jsonOf(n))
	}
	coder.stop()
	chat.stop()
}

// TestRoomNextCandidate: three models on the GPU. The first candidate
// (priority -1) says its sleep frees 4 GiB but its server frees nothing;
// once the GPU's usage has settled without room, the next candidate
// sleeps, and the request is answered; the room event names both.
func TestRoomNextCandidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	small := modelOpts{awake: 5 << 30, asleep: 1 << 30, needs: "5GiB", sleepNeed: "1GiB", keepAwake: "1s", hold: "60s"}
	asker := small
	asker.needs = "6GiB"
	embed := e.startModel("embed", asker)
	embed.sleep() // 1 GiB
	liar := small
	liar.asleep, liar.prio = 5<<30, -1 // asleep, it still holds its 5 GiB
	stuck := e.startModel("stuck", liar)
	chat := e.startModel("chat", small)
	e.waitRunning("stuck", "chat")
	time.Sleep(time.Second)
	// 1 + 5 + 5 = 11 GiB: embed's 6 GiB fit in 4.4 only once 1.6 GiB more leave.
	if code, took := embed.get(""); code != 200 || took > 30*time.Second {
		t.Fatalf("request for embed: %d after %s, want 200", code, took)
	}
	waitFor(t, "embed's room event", 10*time.Second, func() bool { return len(embed.events(api.EventRoom)) > 0 })
	rooms := embed.events(api.EventRoom)
	if len(rooms) != 1 || !slices.Equal(rooms[0].Slept, []string{"stuck", "chat"}) {
		t.Fatalf("embed's room events %s, want stuck then chat slept", jsonOf(rooms))
	}
	for _, m := range []*model{stuck, chat} {
		if downs := m.roomDowns(); len(downs) != 1 || downs[0].For != "embed" {
			t.Errorf("%s's room step-downs %s, want one for embed", m.name, jsonOf(downs))
		}
	}
	for _, m := range []*model{embed, stuck, chat} {
		m.stop()
	}
}

// TestRoomTakingTurns: two models that cannot both fit, asked for by a
// client that alternates between them (three requests to one, then three
// to the other) for 60 s: no request fails, they swap, and no model is
// put to sleep for the other within its keep_awake (2 s) of its last
// answer: the request waits for it.
func TestRoomTakingTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := bigModel()
	o.keepAwake = "2s"
	a, b := e.startAsleepAwake("a", o, "b", o)
	var fails []string
	answered := 0
	ends := map[string][]time.Time{} // each model's answers, as the client saw them end
	for end, i := time.Now().Add(60*time.Second), 0; time.Now().Before(end); i++ {
		m := []*model{a, b}[i/3%2]
		code, took, err := m.try("")
		if err != nil || code != 200 {
			fails = append(fails, m.name+": "+jsonOf(map[string]any{"code": code, "err": errString(err), "took": took.String()}))
			continue
		}
		answered++
		ends[m.name] = append(ends[m.name], time.Now())
	}
	if len(fails) > 0 {
		t.Fatalf("%d of %d requests failed: %v", len(fails), len(fails)+answered, fails)
	}
	swaps := len(a.roomDowns()) + len(b.roomDowns())
	if swaps < 4 {
		t.Fatalf("%d swaps in 60 s (%d answered), want them to take turns", swaps, answered)
	}
	for _, m := range []*model{a, b} {
		for _, d := range m.roomDowns() {
			var last time.Time
			for _, e := range ends[m.name] {
				if e.Before(d.Time) {
					last = e
				}
			}
			// The client notes an answer's end a moment after the door
			// does: on a loaded machine, up to a few hundred ms later.
			if !last.IsZero() && d.Time.Sub(last) < 2*time.Second-500*time.Millisecond {
				t.Errorf("%s was put to sleep %s after its last answer, within its keep_awake (2s)", m.name, d.Time.Sub(last))
			}
			// What the peer measured itself when it accepted, to the
			// millisecond: its step's detail says "(idle 2.013s)".
			_, idle, _ := strings.Cut(d.Detail, "(idle ")
			if i, err := time.ParseDuration(strings.TrimSuffix(idle, ")")); err != nil || i < 2*time.Second {
				t.Errorf("%s slept for %s idle %q, want at least its keep_awake (2s): %s", m.name, d.For, idle, d.Detail)
			}
		}
	}
	t.Logf("%d requests answered, %d swaps", answered, swaps)
	a.stop()
	b.stop()
}

// TestIdleNeverCutsAStream: with [serve] idle = "1s", a 4-second stream
// is answered whole, the instance does not step during it, and it sleeps
// once idle has passed since the stream's last chunk.
func TestIdleNeverCutsAStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := bigModel()
	o.serve = `idle = "1s"`
	m := e.startModel("chat", o)
	e.waitRunning("chat")
	// It may fall asleep before the stream (idle since its ready); then
	// the stream's request wakes it. What matters is that no step comes
	// while the stream runs.
	// The stream lasts 4 s from its arrival, which is after began: it
	// cannot end at chat before began + 4 s. (When the client reads its
	// end is no measure: on a loaded machine that lags the door's end.)
	began := time.Now()
	code, took := m.get("seconds=4")
	if code != 200 || took < 4*time.Second {
		t.Fatalf("the stream: %d after %s, want 200 after 4s", code, took)
	}
	ended := began.Add(4 * time.Second)
	m.waitAsleep(t)
	downs := m.events(api.EventStepDown)
	for _, d := range downs {
		if d.Reason != api.ReasonIdle {
			t.Fatalf("step-downs %s, want only idle ones", jsonOf(downs))
		}
		if d.Time.After(began) && d.Time.Before(ended) {
			t.Fatalf("an idle sleep at %s, during the stream (%s to after %s)", d.Time, began, ended)
		}
	}
	if last := downs[len(downs)-1].Time; last.Before(ended.Add(time.Second)) {
		t.Fatalf("the last idle sleep came at %s, before idle (1s) had passed since the stream ended (after %s)", last, ended)
	}
	m.stop()
}

// roomRefused starts coder (as coderOpts, but with hold = 3s) asleep and
// chat (as chatOpts) awake and past its keep_awake (1s), then asks for
// coder where no room is to be made: the request waits out hold and gets
// 503, and chat takes no step.
func (e *env) roomRefused(t *testing.T, coderOpts, chatOpts modelOpts) (coder, chat *model) {
	t.Helper()
	coderOpts.hold = "3s"
	coder, chat = e.startAsleepAwake("coder", coderOpts, "chat", chatOpts)
	time.Sleep(time.Second) // chat's keep_awake
	if code, took := coder.get(""); code != 503 || took < 3*time.Second {
		t.Fatalf("request for coder: %d after %s, want 503 after hold (3s)", code, took)
	}
	if downs := chat.events(api.EventStepDown); len(downs) != 0 {
		t.Fatalf("chat stepped: %s", jsonOf(downs))
	}
	return coder, chat
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRoomThreeModels: the three-model host of docs/sharing.md on the
// fakes, each asleep until asked: chat (8 GiB, priority 10) and the coder
// (7 GiB, priority 10) cannot both be awake; the embedder (2 GiB,
// priority 0, no sleep API: stopped to sleep) fits beside either. Asked
// for in turn: the embedder and chat start; the coder's first start does
// not fit, and chat, idle past its keep_awake, sleeps for it: not the
// embedder, whose sleep alone would not make the room (fewest sleepers).
func TestRoomThreeModels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	chatOpts := modelOpts{awake: 8 << 30, asleep: 1 << 30, needs: "8GiB", sleepNeed: "1GiB", prio: 10, keepAwake: "1s", hold: "60s", startAsleep: true}
	coderOpts := chatOpts
	coderOpts.awake, coderOpts.needs = 7<<30, "7GiB"
	embedOpts := modelOpts{awake: 2 << 30, needs: "2GiB", sleepNeed: "0", keepAwake: "1s", hold: "60s", startAsleep: true, stopped: true}
	chat := e.startModel("chat", chatOpts)
	coder := e.startModel("coder", coderOpts)
	embed := e.startModel("embedder", embedOpts)
	for _, m := range []*model{embed, chat} {
		if code, took := m.get(""); code != 200 {
			t.Fatalf("first request for %s: %d after %s", m.name, code, took)
		}
	}
	time.Sleep(1500 * time.Millisecond) // chat's and the embedder's keep_awake
	if code, took := coder.get(""); code != 200 || took > 30*time.Second {
		t.Fatalf("first request for the coder: %d after %s, want 200", code, took)
	}
	if downs := chat.roomDowns(); len(downs) != 1 || downs[0].For != "coder" {
		t.Fatalf("chat's room step-downs %s, want one for the coder", jsonOf(downs))
	}
	if downs := embed.events(api.EventStepDown); len(downs) != 0 {
		t.Fatalf("the embedder stepped: %s (chat's sleep alone makes the room)", jsonOf(downs))
	}
	waitFor(t, "the coder's room event", 10*time.Second, func() bool { return len(coder.events(api.EventRoom)) > 0 })
	if rooms := coder.events(api.EventRoom); len(rooms) != 1 || !slices.Equal(rooms[0].Slept, []string{"chat"}) {
		t.Fatalf("the coder's room events %s, want chat slept", jsonOf(rooms))
	}
	// The embedder, stopped to sleep for room, frees all it holds: with
	// chat asked for again, the coder (used last) sleeps; the embedder
	// keeps serving.
	if code, _ := embed.get(""); code != 200 {
		t.Fatalf("the embedder: %d", code)
	}
	time.Sleep(1500 * time.Millisecond)
	if code, took := chat.get(""); code != 200 || took > 30*time.Second {
		t.Fatalf("chat again: %d after %s", code, took)
	}
	if downs := coder.roomDowns(); len(downs) != 1 || downs[0].For != "chat" {
		t.Fatalf("the coder's room step-downs %s, want one for chat", jsonOf(downs))
	}
	if st := embed.status(); st.State != api.StateRunning {
		t.Fatalf("the embedder is %s, want running", st.State)
	}
	for _, m := range []*model{chat, coder, embed} {
		m.stop()
	}
}
