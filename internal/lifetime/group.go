package lifetime

import "github.com/oklog/run"

// Group is the run's parts, in the order they opened. The zero value is
// an empty group.
type Group struct {
	parts []part
}

type part struct {
	execute   func() error
	interrupt func(error)
}

// Add adds a part: execute runs for the part's life and returns once
// interrupt has been called. A part's execute that returns early ends the
// run, as in run.Group: parts whose work can fail on its own should say
// so and wait for their interrupt instead.
func (g *Group) Add(execute func() error, interrupt func(error)) {
	g.parts = append(g.parts, part{execute: execute, interrupt: interrupt})
}

// Hold adds a part that only holds something open (a file, a listener, a
// library): it lives until the run ends, and then release runs. release also
// runs when the group aborts.
func (g *Group) Hold(release func()) {
	stop := make(chan struct{})
	g.Add(func() error { <-stop; return nil }, func(error) {
		release()
		close(stop)
	})
}

// Abort closes what opened, newest first, for a run that fails before Run:
// the parts' interrupts run with err, their executes never. It returns err.
func (g *Group) Abort(err error) error {
	for i := len(g.parts) - 1; i >= 0; i-- {
		g.parts[i].interrupt(err)
	}
	g.parts = nil
	return err
}

// Run runs main and the parts until one of them returns (main, in a run
// whose parts all wait for their interrupt). Then main is interrupted, and
// the group waits for it to return before it interrupts the parts, newest
// first. Run returns main's error, whoever ended the run.
func (g *Group) Run(main func() error, interrupt func(error)) error {
	var rg run.Group
	var mainErr error
	done := make(chan struct{})
	rg.Add(func() error {
		mainErr = main()
		close(done)
		return mainErr
	}, func(err error) {
		interrupt(err)
		<-done
	})
	for i := len(g.parts) - 1; i >= 0; i-- {
		rg.Add(g.parts[i].execute, g.parts[i].interrupt)
	}
	g.parts = nil
	_ = rg.Run()
	return mainErr
}
