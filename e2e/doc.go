// Package e2e runs the real gpuguard binary with real child processes on
// the simulated GPU: every behaviour of the contract that a user can see
// from outside (exit codes, the child's environment, the state file,
// checkpoints, signals, the control socket, metrics, sd_notify) has a test
// here that would fail if it were lost.
//
// # Writing a test
//
// Tests run in parallel. An end-to-end test spends most of its time
// waiting (for a child to load, a watermark to be sustained, a grace to
// pass), so the package runs up to 4 tests a CPU at once (TestMain; -parallel
// N overrides), and a test starts with t.Parallel():
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		e := newEnv(t)
//		...
//	}
//
// newEnv gives each test its own state dir, runtime dir and sim dir under a
// temp dir of its own, so tests that use them share nothing. What they do
// share, and what a parallel test must therefore not do:
//   - the process: no t.Setenv, os.Chdir, os.Setenv or umask in the test
//     itself (pass variables to the binary: e.start(args, "K=V"));
//   - ports: take an address with freeLoopbackAddr (or listen on port 0),
//     never a fixed port;
//   - the binary: bin (race detector) and pfPlain() (without) are built
//     once for the package; never build gpuguard in a test. Set
//     GPUGUARD_RACE_BIN and GPUGUARD_BIN to binaries built before
//     (scripts/test.sh does) and the package builds none.
//
// A test that must run alone says why in its doc comment, in a paragraph
// that starts with "Serial:" (for example a bound on a latency that other
// tests' load would stretch), and does not call t.Parallel.
// TestEveryTestSaysHowItRuns holds every test to one of the two.
//
// Subtests of a loop can call t.Parallel() too, when each makes its own
// env and the loop does nothing after t.Run but wait.
//
// Long versions (soaks) run only with GPUGUARD_SOAK=1 (scripts/soak.sh):
// keep a test's default short and its long form behind that variable.
package e2e
