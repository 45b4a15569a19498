package policy

import "github.com/gpuguard/gpuguard/internal/backends"

// Option adjusts how Parse reads a policy.
type Option func(*parseOptions)

type parseOptions struct {
	backends []string
}

// Backends are the names [watch] backend may take, in the order its error
// lists them: the composition root passes its backend table's names
// (open.Names). Policy cannot read that table itself, for the table holds
// the openers and so imports the drivers (cgo), and the supervisor
// imports policy.
//
// Without the option only the default, backends.Auto, is accepted: a
// caller that forgot it refuses every other name at once, in its first
// test, rather than letting a misspelt backend through to be refused at
// open without its file and line.
func Backends(names ...string) Option {
	return func(o *parseOptions) { o.backends = append([]string(nil), names...) }
}

func newParseOptions(opts []Option) parseOptions {
	o := parseOptions{backends: []string{backends.Auto}}
	for _, f := range opts {
		f(&o)
	}
	return o
}
