package tenants

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/paths"
)

// PeerTimeout bounds every question to another tenant. A tenant that has
// not answered by then (hung, SIGSTOPped, overloaded) drops out of that
// decision.
const PeerTimeout = 500 * time.Millisecond

// peer is one other instance of the runtime dir and how it answered.
type peer struct {
	Candidate
	// dead: its socket refused (or is gone): the instance is not running.
	dead bool
	// silent: no answer within PeerTimeout.
	silent bool
}

func (p peer) answered() bool { return !p.dead && !p.silent }

// discover asks every other instance of the runtime dir, at once, what it
// watches.
func (c *Coordinator) discover(ctx context.Context) []peer {
	ins, _ := control.Discover([]string{c.o.RuntimeDir}) // an unreadable dir has no peers
	out := make([]peer, 0, len(ins))
	for _, in := range ins {
		if in.Name != c.o.Name {
			out = append(out, peer{Candidate: Candidate{TenantInfo: api.TenantInfo{Name: in.Name}, Socket: in.Socket}})
		}
	}
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			info, err := c.ask(ctx, out[i].Socket)
			switch {
			case err == nil:
				info.Name = out[i].Name // the socket's name is the identity
				out[i].TenantInfo = info
			case refused(err):
				out[i].dead = true
			default:
				out[i].silent = true
			}
		})
	}
	wg.Wait()
	return out
}

// ask sends `tenant` to one socket, within PeerTimeout.
func (c *Coordinator) ask(ctx context.Context, socket string) (api.TenantInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.PeerTimeout)
	defer cancel()
	cl, err := control.Dial(ctx, socket)
	if err != nil {
		return api.TenantInfo{}, err
	}
	defer cl.Close()
	return cl.Tenant(ctx)
}

// socket is the control socket of the instance name in the runtime dir.
func (c *Coordinator) socket(name string) string { return paths.Socket(c.o.RuntimeDir, name) }

// refused reports an error that means the instance is not running: its
// socket refuses connections (a SIGKILLed instance leaves the file) or is
// gone.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist)
}
