// Package sqlite is the embedded deferred-task store: one SQLite database
// in <state-dir>/deferred/, through modernc.org/sqlite (pure Go, so
// CGO_ENABLED=0 builds keep working).
//
// Why SQLite. The store must be durable per task (a ticket is answered only
// after its task is on disk), shared by several processes on one host (the
// instance, and `gpuguard tasks` listing, dropping and retrying while it
// runs), and able to lease one task atomically. A spool dir of one file per
// task gets durability from write+fsync+rename and fsync of the dir, but
// every state change is a rename dance, listing 100,000 tasks is 100,000
// opens, and "lease the oldest due task" needs a lock file of its own.
// bbolt is one file with real transactions, but it takes an exclusive
// flock on open: while the instance holds the queue, `gpuguard tasks`
// could not even read it. SQLite in WAL mode lets readers and one writer
// from several processes work at once (busy_timeout makes a second writer
// wait, not fail), synchronous=FULL fsyncs the WAL at every commit, and a
// lease is one `UPDATE ... RETURNING`. WAL needs every process on one host,
// which is this store's scope; several hosts share tasks/redis instead.
//
// A queue delivered costs one fsynced commit per task. Delivery is one task
// at a time per subscriber, so the done of one task and the lease of the
// next follow each other: AckLease writes both in one UPDATE of the two
// rows, which also checks that the next is the oldest due and answers the
// task due after it, for the next done to lease with no Peek. The first
// task of a run is leased on its own (Lease, at synchronous=NORMAL: the next
// fsynced commit makes it durable, a WAL being written in order).
//
// A task's bodies (a deferred request's, and its response's) are rows of
// a table of their own, a chunk a row, written as they arrive at
// synchronous=NORMAL and made durable by the task's own commit, for the
// same reason (body.go).
package sqlite
