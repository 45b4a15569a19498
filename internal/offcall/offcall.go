// Package offcall runs a call that may never return (a driver's, a
// blocking read) on a goroutine of its own, so that the caller can stop
// waiting for it and keep its result for later.
package offcall

// Result is the result of one call made off the caller's goroutine.
type Result[T any] struct {
	V   T
	Err error
}

// Go starts f and returns where its result will be (buffered: f never
// blocks on a caller that gave up).
func Go[T any](f func() (T, error)) <-chan Result[T] {
	c := make(chan Result[T], 1)
	go func() {
		v, err := f()
		c <- Result[T]{v, err}
	}()
	return c
}
