// Package safetext is the one rule for printing, as text for a person,
// a string that came from a child, a client or a file: a task's tool and
// last error, a journal event's reason, a child's OOM message, a log
// line. Written raw, such a string's ESC or BEL would drive the operator's
// terminal (move the cursor, retitle the window, hide what came before),
// so that a client could rewrite what `gpuguard status` or `gpuguard
// tasks` shows. Every text output (status, tasks, report, run's log)
// passes those strings through Escape; JSON output needs nothing, since
// encoding/json escapes control characters itself.
package safetext
