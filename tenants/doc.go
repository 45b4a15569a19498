// Package tenants lets the gpuguard instances that share a GPU agree on
// who acts, without a daemon: peers that meet in the shared runtime dir.
//
// A tenant of a GPU is a running instance in the same runtime dir that
// watches the same GPU UUID. Instances find each other by listing the
// control sockets and asking each one, over the internal `tenant` request,
// what it watches (500 ms each: a socket that refuses is a dead instance
// and drops out at once; one that does not answer, hung or SIGSTOPped,
// drops out at the timeout).
//
// What they agree on lives in one directory per GPU, <runtime>/gpus/<key>/:
//
//   - the decision log: d.<seq> is a claim (this tenant decides that tenant
//     steps), d.<seq>.ok how it ended (confirmed by the tenant that executed
//     it, or void). Both names are created exclusively (link(2)), so of two
//     tenants that decide at once exactly one gets the seq, and of an
//     executor confirming and a decider giving up exactly one wins;
//   - start claims s.<seq>: one start at a time on a shared GPU;
//   - admit.lock: flock(2)ed while one reservation is decided.
//
// These rest on three kernel facts: a dead process's Unix socket refuses
// connections, link(2) creates a name exclusively, and flock is released
// when its holder dies. Nothing here waits on a peer without a timeout, so
// no tenant can block the others.
//
// The ranking (who steps) is a pure comparator chain in rank.go, the log's
// rules pure functions in log.go; Coordinator does the I/O. The supervisor
// reaches all of it through a small interface of its own.
package tenants
