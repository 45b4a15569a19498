//go:build !linux

package serve

// watchGone cannot see a client leave without reading here: a held
// request whose body is unread is found gone only when it is sent (Linux
// watches the socket, gone_linux.go).
func (c *clientConn) watchGone() (gone <-chan struct{}, stop func()) { return nil, func() {} }
