//go:build !linux

package gpu

// simWatch is a plain listing here: without inotify, nothing says that a
// device dir did not change, so every sample lists it.
type simWatch struct{}

func newSimWatch() *simWatch { return &simWatch{} }

func (w *simWatch) drain() {}

func (w *simWatch) read(i int, dir string) (simReading, error) { return readSimDevice(dir, i) }

func (w *simWatch) close() error { return nil }
