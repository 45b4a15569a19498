package tenants

import (
	"reflect"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

var t0 = time.Unix(1_700_000_000, 0)

func claimAt(seq int64, to string, at time.Duration) Entry {
	return Entry{Seq: seq, Claim: &Claim{Seq: seq, GPU: gpuA, Kind: api.KindDown, To: to, By: "x", At: t0.Add(at).UnixNano()}}
}

func confirmed(e Entry, at time.Duration, grace time.Duration) Entry {
	e.End = &End{By: e.Claim.To, At: t0.Add(at).UnixNano(), GraceSeconds: grace.Seconds()}
	return e
}

func voided(e Entry) Entry {
	e.End = &End{Void: true, By: "x", At: e.Claim.At}
	return e
}

func TestEvaluate(t *testing.T) {
	rec := func(seq int64, to string, at, grace time.Duration) *api.TenantDecision {
		return &api.TenantDecision{GPU: gpuA, Seq: seq, Kind: api.KindDown, To: to, At: t0.Add(at).UnixNano(), GraceSeconds: grace.Seconds()}
	}
	for _, tc := range []struct {
		name    string
		entries []Entry
		now     time.Duration
		want    State
	}{
		{"empty log: decide seq 1", nil, 0, State{Next: 1}},
		{"a confirmed decision holds until its grace has passed", []Entry{confirmed(claimAt(4, "b", 0), 10*time.Millisecond, 5*time.Second)},
			3 * time.Second, State{Next: 5, Hold: true, Record: rec(4, "b", 10*time.Millisecond, 5*time.Second)}},
		{"then the next decision may be taken", []Entry{confirmed(claimAt(4, "b", 0), 10*time.Millisecond, 5*time.Second)},
			5*time.Second + 10*time.Millisecond, State{Next: 5}},
		{"the newest confirmed decision sets the cadence", []Entry{
			confirmed(claimAt(1, "a", 0), 0, time.Hour), confirmed(claimAt(2, "b", time.Second), time.Second, 2*time.Second)},
			4 * time.Second, State{Next: 3}},
		{"an unconfirmed claim younger than 1s is in flight", []Entry{
			confirmed(claimAt(1, "a", 0), 0, time.Second), claimAt(2, "b", 5*time.Second)},
			5*time.Second + 999*time.Millisecond, State{Next: 3, Hold: true}},
		{"an older one is stale: void it and decide", []Entry{
			confirmed(claimAt(1, "a", 0), 0, time.Second), claimAt(2, "b", 5*time.Second)},
			6 * time.Second, State{Next: 3, Stale: []int64{2}}},
		{"a void claim holds nothing", []Entry{voided(claimAt(7, "b", 0))}, 10 * time.Millisecond, State{Next: 8}},
		{"a void claim does not hide the cadence of an older decision", []Entry{
			confirmed(claimAt(6, "a", 0), 0, 10*time.Second), voided(claimAt(7, "b", time.Second))},
			2 * time.Second, State{Next: 8, Hold: true, Record: rec(6, "a", 0, 10*time.Second)}},
		{"an end without its claim (collected) still counts its seq", []Entry{{Seq: 9, End: &End{Void: true}}},
			0, State{Next: 10}},
		{"holding, nothing is stale yet", []Entry{claimAt(1, "a", 0), claimAt(2, "b", 2*time.Second)},
			2*time.Second + 10*time.Millisecond, State{Next: 3, Hold: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(tc.entries, t0.Add(tc.now))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Evaluate =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

func TestEntryDecision(t *testing.T) {
	e := confirmed(claimAt(3, "emb", 0), time.Second, 10*time.Second)
	want := api.TenantDecision{GPU: gpuA, Seq: 3, Kind: api.KindDown, To: "emb", At: t0.Add(time.Second).UnixNano(), GraceSeconds: 10}
	if got := e.Decision(); got != want {
		t.Errorf("Decision = %+v, want %+v", got, want)
	}
}

func TestBlocking(t *testing.T) {
	sc := func(seq int64, by string, at time.Duration, settle float64) StartClaim {
		return StartClaim{Seq: seq, By: by, At: t0.Add(at).UnixNano(), SettleSeconds: settle}
	}
	for _, tc := range []struct {
		name      string
		claims    []StartClaim
		now       time.Duration
		wantBy    string // "" = nothing blocks
		wantNext  int64
		wantBlock bool
	}{
		{"no claim", nil, 0, "", 1, false},
		{"another tenant's newest claim may block", []StartClaim{sc(1, "a", 0, 5), sc(2, "b", time.Second, 5)}, 2 * time.Second, "b", 3, true},
		{"our own claim never blocks us", []StartClaim{sc(1, "b", 0, 5), sc(2, "me", time.Second, 5)}, 2 * time.Second, "", 3, false},
		{"past 10 x the holder's settle it blocks nothing", []StartClaim{sc(4, "b", 0, 2)}, 20 * time.Second, "", 5, false},
		{"just before that it may", []StartClaim{sc(4, "b", 0, 2)}, 20*time.Second - time.Millisecond, "b", 5, true},
		{"an older claim of another tenant does not matter", []StartClaim{sc(1, "b", 0, 60), sc(2, "me", 0, 1)}, time.Second, "", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, next := Blocking(tc.claims, "me", t0.Add(tc.now))
			if (b != nil) != tc.wantBlock || next != tc.wantNext || (b != nil && b.By != tc.wantBy) {
				t.Errorf("Blocking = %+v, %d; want by %q (%v), next %d", b, next, tc.wantBy, tc.wantBlock, tc.wantNext)
			}
		})
	}
}
