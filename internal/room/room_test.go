package room

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const gib = 1 << 30

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// idle is a candidate in every respect: serving, can sleep, idle past its
// keep_awake, priority 0, 10 GiB of which it keeps 1 GiB asleep, last
// used an hour before t0.
func idle(name string) Candidate {
	return Candidate{Name: name, Serving: true, CanSleep: true, Idle: 10 * time.Minute, KeepAwake: time.Minute,
		LastUsed: t0.Add(-time.Hour), UsedBytes: 10 * gib, SleepBytes: gib}
}

func with(c Candidate, f func(*Candidate)) Candidate {
	f(&c)
	return c
}

func names(cs []Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestRank: who may sleep for an asker of priority 0, and in which order.
func TestRank(t *testing.T) {
	for _, tt := range []struct {
		name string
		cs   []Candidate
		want []string
	}{
		{"lowest priority first", []Candidate{
			with(idle("a"), func(c *Candidate) { c.Priority = 0 }),
			with(idle("b"), func(c *Candidate) { c.Priority = -5 }),
		}, []string{"b", "a"}},
		{"then least recently used", []Candidate{
			with(idle("a"), func(c *Candidate) { c.LastUsed = t0.Add(-time.Minute) }),
			with(idle("b"), func(c *Candidate) { c.LastUsed = t0.Add(-2 * time.Hour) }),
		}, []string{"b", "a"}},
		{"then most memory", []Candidate{
			with(idle("a"), func(c *Candidate) { c.UsedBytes = 4 * gib }),
			with(idle("b"), func(c *Candidate) { c.UsedBytes = 8 * gib }),
		}, []string{"b", "a"}},
		{"then by name", []Candidate{idle("b"), idle("a")}, []string{"a", "b"}},
		{"priority before use", []Candidate{
			with(idle("a"), func(c *Candidate) { c.LastUsed = t0.Add(-24 * time.Hour) }),
			with(idle("b"), func(c *Candidate) { c.Priority = -1 }),
		}, []string{"b", "a"}},
		{"busy excluded", []Candidate{idle("a"), with(idle("b"), func(c *Candidate) { c.Busy = true })}, []string{"a"}},
		{"within keep_awake excluded", []Candidate{
			idle("a"),
			with(idle("b"), func(c *Candidate) { c.Idle, c.KeepAwake = 59*time.Second, time.Minute }),
		}, []string{"a"}},
		{"exactly keep_awake idle is a candidate", []Candidate{
			with(idle("a"), func(c *Candidate) { c.Idle, c.KeepAwake = time.Minute, time.Minute }),
		}, []string{"a"}},
		{"keep_awake 0: idle at once", []Candidate{
			with(idle("a"), func(c *Candidate) { c.Idle, c.KeepAwake = 0, 0 }),
		}, []string{"a"}},
		{"higher priority excluded", []Candidate{idle("a"), with(idle("b"), func(c *Candidate) { c.Priority = 1 })}, []string{"a"}},
		{"observe excluded", []Candidate{idle("a"), with(idle("b"), func(c *Candidate) { c.Observe = true })}, []string{"a"}},
		{"not serving excluded", []Candidate{idle("a"), with(idle("b"), func(c *Candidate) { c.Serving = false })}, []string{"a"}},
		{"cannot sleep excluded", []Candidate{idle("a"), with(idle("b"), func(c *Candidate) { c.CanSleep = false })}, []string{"a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(Rank(tt.cs, 0)); !slices.Equal(got, tt.want) {
				t.Fatalf("Rank = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWhy: each refusal says why.
func TestWhy(t *testing.T) {
	for _, tt := range []struct {
		c    Candidate
		want string
	}{
		{idle("a"), ""},
		{with(idle("a"), func(c *Candidate) { c.Busy = true }), "in flight or held"},
		{with(idle("a"), func(c *Candidate) { c.Idle = time.Second }), "within its keep_awake 1m0s"},
		{with(idle("a"), func(c *Candidate) { c.Priority = 3 }), "priority 3 is higher than the asker's 0"},
		{with(idle("a"), func(c *Candidate) { c.Observe = true }), "observe mode"},
		{with(idle("a"), func(c *Candidate) { c.Serving = false }), "not serving"},
		{with(idle("a"), func(c *Candidate) { c.CanSleep = false }), "cannot sleep"},
	} {
		got := Why(tt.c, 0)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("Why(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// TestSoon: how soon a peer kept out only by time may be a candidate.
func TestSoon(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Candidate
		want time.Duration
		ok   bool
	}{
		{"a candidate now", idle("a"), 0, false},
		{"busy", with(idle("a"), func(c *Candidate) { c.Busy, c.Idle = true, 0 }), BusyRetry, true},
		{"within keep_awake", with(idle("a"), func(c *Candidate) { c.Idle = 45 * time.Second }), 15 * time.Second, true},
		{"busy and of higher priority", with(idle("a"), func(c *Candidate) { c.Busy, c.Priority = true, 1 }), 0, false},
		{"asleep", with(idle("a"), func(c *Candidate) { c.Serving, c.Idle = false, 0 }), 0, false},
	} {
		if got, ok := Soon(tt.c, 0); got != tt.want || ok != tt.ok {
			t.Errorf("%s: Soon = %s, %v; want %s, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestChoose: only as many sleep as the shortfall needs, in order; when
// all the candidates together cannot cover it, nobody sleeps.
func TestChoose(t *testing.T) {
	small := func(name string, used uint64) Candidate {
		return with(idle(name), func(c *Candidate) { c.UsedBytes, c.SleepBytes = used, 0 })
	}
	for _, tt := range []struct {
		name      string
		cs        []Candidate
		shortfall uint64
		want      []string
		could     uint64
	}{
		{"one covers it: one sleeps", []Candidate{idle("a"), idle("b"), idle("c")}, 5 * gib, []string{"a"}, 27 * gib},
		{"exactly covered", []Candidate{idle("a"), idle("b")}, 9 * gib, []string{"a"}, 18 * gib},
		{"two needed, in order", []Candidate{idle("a"), idle("b"), idle("c")}, 10 * gib, []string{"a", "b"}, 27 * gib},
		{"not enough: nobody", []Candidate{idle("a"), idle("b")}, 19 * gib, nil, 18 * gib},
		{"no candidate: nobody", []Candidate{with(idle("a"), func(c *Candidate) { c.Busy = true })}, gib, nil, 0},
		{"the busy one does not count toward could free", []Candidate{idle("a"), with(idle("b"), func(c *Candidate) { c.Busy = true })},
			12 * gib, nil, 9 * gib},
		{"a small one the large one covers without is left out", []Candidate{
			with(small("a", gib), func(c *Candidate) { c.Priority = -1 }), small("b", 10*gib),
		}, 8 * gib, []string{"b"}, 11 * gib},
		{"one that frees nothing is passed over", []Candidate{
			with(small("a", 0), func(c *Candidate) { c.Priority = -1 }), small("b", 10*gib),
		}, 8 * gib, []string{"b"}, 10 * gib},
		{"asleep needs more than it uses: frees nothing", []Candidate{
			with(idle("a"), func(c *Candidate) { c.UsedBytes, c.SleepBytes = gib, 2*gib }),
		}, 1, nil, 0},
		{"no shortfall: nobody", []Candidate{idle("a")}, 0, nil, 9 * gib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, could := Choose(tt.cs, 0, tt.shortfall)
			if !slices.Equal(names(got), tt.want) || could != tt.could {
				t.Fatalf("Choose = %v, could free %d; want %v, %d", names(got), could, tt.want, tt.could)
			}
		})
	}
}
