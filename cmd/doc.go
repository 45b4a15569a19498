// Package cmd is the cobra command tree: flags become an options struct and
// an options struct becomes a call into a package. Exit codes live in
// exit.go and nowhere else.
package cmd
