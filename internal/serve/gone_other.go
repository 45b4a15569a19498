//go:build !linux

package serve

// watcher is nil here: without a way to see a client leave without
// reading, a held request whose body is unread is found gone only when it
// is sent (Linux watches the socket, gone_linux.go).
func (c *clientConn) watcher() watcher { return nil }
