//go:build !unix

package serve

// peeker is empty where a socket cannot be peeked at: a kept connection
// the child closed is found when the request fails on it, and retried as
// http.Transport retries (hopTransport.RoundTrip).
type peeker struct{}

func (c *hopConn) initAlive() {}

func (c *hopConn) alive() bool { return true }
