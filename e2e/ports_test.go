package e2e

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeLoopbackAddr is a loopback address, free now, that no other test of
// the package is given, for gpuguard or a child to listen on.
//
// It is taken below the kernel's ephemeral range: a port the kernel chose
// for a listen on port 0 and that was closed again can be handed to the
// next outgoing connection, or the next listen on port 0, of any test
// running in parallel (every HTTP request a test makes takes an ephemeral
// port), before the process the address was meant for binds it; one below
// the range is never handed out by the kernel, and ports hands out each
// once in this process.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		port := ports.next()
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // another process holds it
		}
		ln.Close()
		return ln.Addr().String()
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return ""
}

// ports hands out the ports below the ephemeral range in turn, from a
// start of this process's own, so that two e2e runs at once seldom try the
// same ones.
var ports portRange

type portRange struct {
	mu        sync.Mutex
	low, size int // the range: [low, low+size)
	n         int // the last handed out, from low
}

func (r *portRange) next() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size == 0 {
		high := 32768 // Linux's default ip_local_port_range starts here
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
					high = n
				}
			}
		}
		r.low = max(1024, high-16384)
		r.size = high - r.low
		r.n = int((time.Now().UnixNano()/1000 + int64(os.Getpid())*7919) % int64(r.size))
	}
	r.n = (r.n + 1) % r.size
	return r.low + r.n
}
