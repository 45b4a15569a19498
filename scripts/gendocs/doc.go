// Command gendocs writes gpuguard's man pages (one per command) and its
// shell completion scripts from the cobra command tree, so that they can
// never drift from the flags the binary really takes. scripts/package.sh
// runs it to fill the Debian package:
//
//	go run ./scripts/gendocs -source "gpuguard 0.1.0" -man DIR \
//	  -bash FILE -zsh FILE -fish FILE
//
// It is a program of its own rather than a hidden gpuguard subcommand so
// that the man page renderer (cobra/doc and go-md2man) stays out of the
// gpuguard binary. The man pages' date comes from SOURCE_DATE_EPOCH when it
// is set (reproducible builds), else from today.
package main
