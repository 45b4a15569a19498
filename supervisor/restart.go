package supervisor

import "github.com/gpuguard/gpuguard/supervisor/core"

// The restart rules live in the decision core (core/exit.go); these are
// its names for how a child ended, as the loop's files spell them.
type exitKind = core.ExitKind

const (
	exitClean     = core.ExitClean
	exitCrash     = core.ExitCrash
	exitRequested = core.ExitRequested
	exitReload    = core.ExitReload
)
