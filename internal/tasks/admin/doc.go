// Package admin is what `gpuguard tasks` does once its flags are read:
// list the deferred tasks of one or more instances, streaming (100,000
// tasks never sit in memory twice), and drop or retry one, telling the
// running instance (which journals the change) or journaling it here when
// none runs. cmd holds the command and its flags; this package holds the
// work, so that it can be tested without cobra.
package admin
