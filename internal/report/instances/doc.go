// Package instances finds the instances that `report` and `tasks` read
// when none is named (every state dir under the state root with a journal,
// or a queue), reads one instance's journal into a report.Summary, and
// tells whether the instance is live (its control socket accepts a
// connection).
//
// It is the I/O around package report, which stays pure: events in, a
// Summary out. The commands (cmd/report.go, cmd/tasks.go) parse flags,
// map these errors to exit codes and print.
package instances
