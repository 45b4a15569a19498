package serve

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestWatcherNeedsASocket: a held request whose connection has no socket
// to poll is not watched: it waits for the gate to open, as it would
// without a watcher, rather than end at once.
func TestWatcherNeedsASocket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g gate
		go func() {
			time.Sleep(time.Second)
			g.setOpen(true)
		}()
		cc := newClientConn(streamConn{r: strings.NewReader("")})
		waited, err := g.wait(context.Background(), time.Minute, 1, cc.watcher())
		if err != nil || waited != time.Second {
			t.Errorf("held %s: %v, want let through after 1s", waited, err)
		}
	})
}
