// Package tenants lets the gpuguard instances that share a GPU agree on
// who acts, without a daemon: peers that meet in the shared runtime dir.
//
// A tenant of a GPU is a running instance in the same runtime dir that
// watches the same GPU UUID. Everything they share lives in files, so that
// a decision reads a few small files instead of waking every peer:
//
//   - <runtime>/gpus/live.<name>: flock(2)ed by each instance for as long as
//     it runs. A tenant's other files count only while this lock is held;
//     the kernel drops it when the tenant dies (even by SIGKILL), so a dead
//     tenant drops out at once and nothing it left is stale.
//   - per GPU, <runtime>/gpus/<key>/ (key: the UUID, or a hash of it):
//   - t.<name>: what the tenant is and can do (priority, scope, level,
//     observe, own usage, grace, settle), rewritten when that changes;
//   - l.<name>: the sum of its outstanding admission leases;
//   - the decision log: d.<seq> is a claim (this tenant decides that tenant
//     steps), d.<seq>.ok how it ended (confirmed by the executor before it
//     steps, or void when the decider gave up). Both names are created
//     exclusively (link(2)): of two deciders exactly one gets the seq, and
//     of an executor confirming and a decider voiding exactly one wins, so
//     a step happens once or not at all;
//   - s.<seq>: start claims, one start at a time on a shared GPU;
//   - decide.lock: taken without waiting, so that one tenant decides at a
//     time (a holder that hangs is ignored after ClaimTTL: the exclusive
//     claims keep it correct);
//   - admit.lock: flocked while one reservation is decided, waited for at
//     most LockWait.
//
// Making room (room.go): a tenant that needs room on a GPU reads the
// records of the tenants that can sleep, asks each for its fresh facts
// (`tenant`), ranks them (package room) and asks the first to sleep
// (`tenant_sleep`), which decides by its own facts; it then follows that
// sleep until it is done.
//
// Only the chosen tenant is asked, over its control socket (`tenant_step`,
// within PeerTimeout). One that does not answer (hung, SIGSTOPped) is
// passed over, and the next candidate is chosen within a second. Nothing
// waits on a peer without a bound, so no tenant can block the others.
//
// Anything else found in a GPU's directory is survived (sweep.go): every
// file is read non-blocking, never through a symlink, regular files only
// and at most MaxFileBytes; a record that cannot be parsed is void (it
// takes its seq and decides or blocks nothing) and is swept once it is
// old; values read from peers are held to policy's ranges.
//
// The ranking (who steps) is a pure comparator chain in rank.go, the log's
// rules pure functions in log.go; Coordinator does the I/O. The supervisor
// reaches all of it through a small interface of its own.
package tenants
