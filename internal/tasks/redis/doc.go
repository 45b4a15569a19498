// Package redis is the deferred-task store that several hosts share: the
// instances of one name on every host use one Redis stream,
// gpuguard:tasks:<name>, with the consumer group "gpuguard".
//
// Layout (P = gpuguard:tasks:<name>):
//
//	P              the stream: one entry per delivery round of a task
//	               ({ticket}); a task's entry is read into the group (its
//	               pending list) when the task is first leased, and stays
//	               pending until the task is done, dead or dropped
//	P:task:<t>     a hash: the task's fields, state, attempts, result, the
//	               holder that leased it and its stream entry
//	P:ready        zset, queued tasks due now, by enqueue time (oldest first)
//	P:delayed      zset, queued tasks backing off, by not-before time
//	P:running      zset, leased tasks, by lease time
//	P:done         zset, done tasks, by finish time (keep_results)
//	P:all          zset, every task, by enqueue time (listing)
//	P:counts       hash, tasks by state (max_tasks, status)
//	P:body:<id>    string, a task's body (a deferred request's, or its
//	               response's), APPENDed a chunk at a time; it expires
//	               until the script that stores its task makes it persist
//
// Every change is one Lua script, so it is atomic across hosts. A lease
// claims the task's entry to this host's consumer (XCLAIM); the visibility
// timeout is XAUTOCLAIM, which lets any host take over the entries of a
// host that died once they have been idle for ack_timeout. Times are kept
// in microseconds, which Lua's numbers hold exactly.
//
// "Nothing lost" holds only if Redis persists each write before it
// answers: `appendonly yes` with `appendfsync always`. With `everysec`
// (Redis' default for AOF) a crash of the Redis host can lose the last
// second of tickets already answered.
package redis
