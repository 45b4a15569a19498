package deliver

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
	"github.com/gpuguard/gpuguard/policy"
)

// callCounter is a store that counts the calls an idle deliverer could
// make on its own: Peek, and housekeeping's Expire, Purge and Counts.
type callCounter struct {
	Store
	mu                          sync.Mutex
	peek, expire, purge, counts int
}

func (c *callCounter) Peek(ctx context.Context, now time.Time) (api.Task, bool, time.Time, error) {
	c.count(&c.peek)
	return c.Store.Peek(ctx, now)
}

func (c *callCounter) Expire(ctx context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error) {
	c.count(&c.expire)
	return c.Store.Expire(ctx, now, visibility, maxAttempts)
}

func (c *callCounter) Purge(ctx context.Context, before time.Time) (int, error) {
	c.count(&c.purge)
	return c.Store.Purge(ctx, before)
}

func (c *callCounter) Counts(ctx context.Context) (api.TaskCounts, error) {
	c.count(&c.counts)
	return c.Store.Counts(ctx)
}

func (c *callCounter) count(n *int) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

// calls are the counts so far: Peek, Expire, Purge, Counts.
func (c *callCounter) calls() [4]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [4]int{c.peek, c.expire, c.purge, c.counts}
}

// passCounter counts the deliverer's reads of the [defer] in force: one
// a pass.
type passCounter struct {
	*fakeInstance
	mu sync.Mutex
	n  int
}

func (p *passCounter) Defer() policy.Defer {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	return p.fakeInstance.Defer()
}

func (p *passCounter) passes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// samples pokes q once a second for d, as the supervisor's calm samples
// do.
func samples(q *Tasks, d time.Duration) {
	for range int(d / time.Second) {
		time.Sleep(time.Second)
		q.Poke()
		synctest.Wait()
	}
}

// An hour of calm samples, with an empty store of the instance's own, a
// subscriber and a door that would replay, wakes the deliverer for
// nothing: no pass, no store call.
func TestIdleSamplesCostNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &callCounter{Store: memstore.New().Open()}
		fi := newInstance()
		fi.replayable = true
		pc := &passCounter{fakeInstance: fi}
		q := runWith(t, pc, fi, Options{Store: store, Replayer: &fakeReplayer{}})
		subscribe(q)
		synctest.Wait()
		passes, calls := pc.passes(), store.calls()
		samples(q, time.Hour)
		if n := pc.passes() - passes; n != 0 {
			t.Errorf("%d passes over an hour of calm samples, want none", n)
		}
		if got := store.calls(); got != calls {
			t.Errorf("store calls (Peek, Expire, Purge, Counts) %v then %v after an hour idle, want none", calls, got)
		}
	})
}

// A task queued while memory is short is looked at again at each sample
// until one finds that it fits, and delivered at that sample; then the
// samples stop waking the deliverer (its housekeeping goes on while the
// task runs).
func TestQueuedTaskDeliveredAtTheSampleThatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fi := newInstance()
		pc := &passCounter{fakeInstance: fi}
		q := runWith(t, pc, fi, Options{Store: memstore.New().Open()})
		s := subscribe(q)
		samples(q, time.Minute)
		a := deferTask(t, q, "a")
		synctest.Wait()
		looks, _ := fi.looks()
		samples(q, 10*time.Second)
		if n, _ := fi.looks(); n-looks < 10 {
			t.Fatalf("%d looks over 10 samples while the task waits for memory, want one a sample", n-looks)
		}
		fi.set(func(f *fakeInstance) { f.room = 8 * gib })
		samples(q, time.Second)
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != a {
			t.Fatalf("deliveries %+v at the sample that fits, want %s", got, a)
		}
		time.Sleep(time.Second / 2) // samples between the housekeeping's whole seconds
		passes := pc.passes()
		samples(q, time.Minute)
		if n := pc.passes() - passes; n > int(time.Minute/taskHousekeeping) {
			t.Fatalf("%d passes over a minute of samples with the task in flight, want its housekeeping's alone", n)
		}
	})
}

// A deferred request waits for the child and memory (Replayable), which a
// sample tells, while a subscriber waits for other tasks.
func TestReplayWaitsBesideASubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		r := &fakeReplayer{}
		q, fi := run(t, mem, r)
		subscribe(q)
		ticket := deferRequest(t, q, "")
		samples(q, 3*time.Second)
		if n := r.count(); n != 0 {
			t.Fatalf("replayed %d times while not replayable", n)
		}
		fi.set(func(f *fakeInstance) { f.replayable = true })
		samples(q, time.Second)
		if n, st := r.count(), state(t, mem, ticket); n != 1 || st.State != api.TaskDone {
			t.Fatalf("%d replays, task %s at the sample after the child became ready; want one, done", n, st.State)
		}
	})
}

// On a shared store, a task deferred on another host is delivered here
// within taskHousekeeping, though nothing here told of it; an empty
// shared store costs one Counts each taskHousekeeping, nothing more.
func TestSharedStoreTaskFromAnotherHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		store := &callCounter{Store: mem.Open()}
		fi := newInstance()
		fi.room = 8 * gib
		q := runWith(t, fi, fi, Options{Store: store, Shared: true})
		s := subscribe(q)
		synctest.Wait()
		before := store.calls()
		time.Sleep(time.Minute)
		synctest.Wait()
		after := store.calls()
		if counts := after[3] - before[3]; counts < 11 || counts > 13 || after[0] != before[0] || after[1] != before[1] || after[2] != before[2] {
			t.Fatalf("store calls (Peek, Expire, Purge, Counts) %v then %v over a minute, want about 12 Counts alone", before, after)
		}
		other := api.Task{Ticket: "t-elsewhere", Tool: "embed", Priority: "P2", Bytes: gib, Enqueued: time.Now()}
		if err := mem.Open().Enqueue(context.Background(), other, 100); err != nil {
			t.Fatal(err)
		}
		time.Sleep(taskHousekeeping)
		synctest.Wait()
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != other.Ticket {
			t.Fatalf("deliveries %+v within %s of another host's deferral, want %s", got, taskHousekeeping, other.Ticket)
		}
	})
}

// A store that fails at the start leaves the counts unknown: the tasks it
// holds are not taken for none, and go once it answers again (delivery
// asks every taskRetry, not at the next housekeeping).
func TestStoreFailingAtStartStillDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		earlier := api.Task{Ticket: "t-earlier", Tool: "embed", Priority: "P2", Bytes: gib, Enqueued: time.Now()}
		if err := mem.Open().Enqueue(context.Background(), earlier, 100); err != nil {
			t.Fatal(err)
		}
		mem.Fail(memstore.ErrFailing)
		fi := newInstance()
		fi.room = 8 * gib
		q := runWith(t, fi, fi, Options{Store: mem.Open()})
		s := subscribe(q)
		samples(q, 3*time.Second)
		if got := s.deliveries(); len(got) != 0 {
			t.Fatalf("delivered from a failing store: %+v", got)
		}
		mem.Fail(nil)
		time.Sleep(taskRetry + taskRetry/2)
		synctest.Wait()
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != earlier.Ticket {
			t.Fatalf("deliveries %+v once the store answers, want %s", got, earlier.Ticket)
		}
	})
}

// A done task is removed after keep_results, within taskResync, by the
// deliverer's own timer: no sample, no other task needed. While the store
// only keeps it, housekeeping runs every taskResync, not every
// taskHousekeeping, and does not Expire (nothing runs) or Peek (nothing
// is queued); once it is purged, nothing more.
func TestDoneTaskPurgedOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		store := &callCounter{Store: mem.Open()}
		fi := newInstance()
		q := runWith(t, fi, fi, Options{Store: store})
		s := subscribe(q)
		a := deferTask(t, q, "a")
		fi.set(func(f *fakeInstance) { f.room = 8 * gib })
		q.Poke()
		synctest.Wait()
		if err := q.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := store.calls()
		kept := fi.Defer().KeepResults + taskResync + taskHousekeeping
		time.Sleep(kept)
		synctest.Wait()
		if _, _, err := mem.Open().Get(context.Background(), a); err == nil {
			t.Fatalf("task %s still kept %s after keep_results", a, taskResync+taskHousekeeping)
		}
		if c := q.TaskCounts(); c != (api.TaskCounts{}) {
			t.Fatalf("counts %+v after the purge, want none", c)
		}
		after := store.calls()
		most := int(kept/taskResync) + 1
		if purges, counts := after[2]-before[2], after[3]-before[3]; after[0] != before[0] || after[1] != before[1] ||
			purges == 0 || purges > most || counts > most {
			t.Fatalf("store calls (Peek, Expire, Purge, Counts) %v then %v over %s with a done task kept, want at most %d Purges and Counts alone",
				before, after, kept, most)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := store.calls(); got != after {
			t.Fatalf("store calls %v then %v over an hour with the store empty again, want none", after, got)
		}
	})
}

// sampleDuringLook is an instance where a sample that frees memory is
// taken while the deliverer looks at a task (after its reservation was
// refused, before the look ends), once.
type sampleDuringLook struct {
	*fakeInstance
	once sync.Once
}

func (s *sampleDuringLook) Reserve(ctx context.Context, req admission.Request, quiet bool) (admission.Decision, error) {
	dec, err := s.fakeInstance.Reserve(ctx, req, quiet)
	if quiet {
		s.once.Do(func() {
			s.set(func(f *fakeInstance) { f.room = 8 * gib })
			s.q.Poke()
		})
	}
	return dec, err
}

// A sample taken while a look is under way is not missed: the task goes
// at once, not at the sample after.
func TestSampleDuringALookIsNotMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fi := newInstance()
		q := runWith(t, &sampleDuringLook{fakeInstance: fi}, fi, Options{Store: memstore.New().Open()})
		s := subscribe(q)
		synctest.Wait()
		a := deferTask(t, q, "a")
		synctest.Wait()
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != a {
			t.Fatalf("deliveries %+v after a sample that came during the look, want %s", got, a)
		}
	})
}

// The done of a queue's last task, which may lease the next in its own
// commit, takes no Peek when the counts hold no queued task, as a pass
// takes none.
func TestLastDoneTakesNoPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &callCounter{Store: memstore.New().Open()}
		fi := newInstance()
		q := runWith(t, fi, fi, Options{Store: store})
		s := subscribe(q)
		a := deferTask(t, q, "a")
		fi.set(func(f *fakeInstance) { f.room = 8 * gib })
		q.Poke()
		synctest.Wait()
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != a {
			t.Fatalf("deliveries %+v, want %s", got, a)
		}
		before := store.calls()
		if err := q.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if after := store.calls(); after[0] != before[0] {
			t.Fatalf("%d Peeks for the done of the last queued task, want none", after[0]-before[0])
		}
		if c := q.TaskCounts(); c != (api.TaskCounts{Done: 1}) {
			t.Fatalf("counts %+v after the done, want one done", c)
		}
	})
}
