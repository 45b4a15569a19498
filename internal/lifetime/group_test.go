package lifetime

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// recorder notes the order in which parts close, from any goroutine.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestRunOrder: main's end ends the run; the parts close newest first,
// after main has returned; Run returns main's error.
func TestRunOrder(t *testing.T) {
	var r recorder
	var g Group
	for _, name := range []string{"socket", "metrics", "journal", "probe"} {
		g.Hold(func() { r.note(name) })
	}
	errMain := errors.New("child exited 3")
	err := g.Run(func() error { r.note("main returned"); return errMain }, func(error) { r.note("main interrupted") })
	if !errors.Is(err, errMain) {
		t.Errorf("Run = %v, want main's error", err)
	}
	want := []string{"main returned", "main interrupted", "probe", "journal", "metrics", "socket"}
	if got := r.list(); !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// TestRunPartEndsRun: a part that returns ends the run; main is
// interrupted and the parts wait for its return before they close; Run
// still returns main's error, not the part's.
func TestRunPartEndsRun(t *testing.T) {
	var r recorder
	var g Group
	g.Hold(func() { r.note("journal") })
	g.Add(func() error { return errors.New("listener failed") }, func(error) { r.note("listener interrupted") })
	stop := make(chan struct{})
	errMain := errors.New("stopped")
	err := g.Run(func() error {
		<-stop
		r.note("main returned")
		return errMain
	}, func(error) { close(stop) })
	if !errors.Is(err, errMain) {
		t.Errorf("Run = %v, want main's error", err)
	}
	want := []string{"main returned", "listener interrupted", "journal"}
	if got := r.list(); !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// TestAbort: a run that fails before it starts closes what opened,
// newest first, and runs no execute.
func TestAbort(t *testing.T) {
	var r recorder
	var g Group
	g.Hold(func() { r.note("socket") })
	g.Add(func() error { r.note("executed"); return nil }, func(error) { r.note("door") })
	g.Hold(func() { r.note("probe") })
	errOpen := errors.New("opening the journal")
	if err := g.Abort(errOpen); !errors.Is(err, errOpen) {
		t.Errorf("Abort = %v, want its argument", err)
	}
	if got, want := r.list(), []string{"probe", "door", "socket"}; !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}
