// Package frontdoor is the run's [serve] front door as the supervisor
// holds it: package serve's Door, bound before anything starts (an
// address in use fails the start), configured from [serve] at start and
// at each reload, served for the run's life, and closed once the
// supervisor has returned. Queue is the deferred-task queue as the door
// sees it.
//
// It is apart from serve because the door knows no policy and no
// supervisor, and the supervisor knows no HTTP: this room translates
// between them and holds the door's lifetime.
package frontdoor
