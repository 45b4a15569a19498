package tenants

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/policy"
)

// PeerTimeout bounds every question to another tenant. A tenant that has
// not answered by then (hung, SIGSTOPped, overloaded) drops out of that
// decision.
const PeerTimeout = 500 * time.Millisecond

// silentFor is how long a tenant that did not answer a step in time is
// passed over: while it stays stopped, each decision need not wait for it.
const silentFor = 10 * PeerTimeout

// infoPrefix names a tenant's published TenantInfo in a GPU's directory.
const infoPrefix = "t."

// Who the tenants of a GPU are, and what they can do, is read from the
// files they publish in its directory (t.<name>), each counting while its
// tenant holds its live lock, as the leases do. Asking every tenant over
// its socket at the moment of a decision would wake them all, and a
// decision on a busy GPU must be quick; only the chosen tenant is asked.
// A tenant that died drops out at once (its lock is gone); one that hangs
// or is stopped is chosen, does not answer within PeerTimeout, and is
// passed over for silentFor.

// tenants reads the other tenants of the GPU whose directory is dir: those
// whose live lock is held and that have not been silent lately.
func (c *Coordinator) tenants(dir string) []Candidate {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	now := time.Now()
	var out []Candidate
	for _, de := range ents {
		name, ok := strings.CutPrefix(de.Name(), infoPrefix)
		if !ok || name == c.o.Name || paths.ValidName(name) != nil || c.silence.silent(name, now) {
			continue
		}
		var info api.TenantInfo
		if !readJSON(filepath.Join(dir, de.Name()), &info) || !c.alive(name) {
			continue
		}
		info.Name = name // the file's name is the identity
		clampInfo(&info)
		out = append(out, Candidate{TenantInfo: info, Socket: c.socket(name)})
	}
	return out
}

// silence is the tenants passed over, each until a time: one that did not
// answer a question in time is not asked again while it stays silent.
type silence struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// silent reports whether name is passed over at now.
func (s *silence) silent(name string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.until[name]
	if ok && !now.Before(until) {
		delete(s.until, name)
		return false
	}
	return ok
}

// passOver records that name did not answer in time: it is passed over
// for silentFor.
func (s *silence) passOver(name string) {
	s.mu.Lock()
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	s.until[name] = time.Now().Add(silentFor)
	s.mu.Unlock()
}

// ask sends `tenant` to one socket, within PeerTimeout.
func (c *Coordinator) ask(ctx context.Context, socket string) (api.TenantInfo, error) {
	return request(ctx, c.o.PeerTimeout, socket, (*control.Client).Tenant)
}

// request makes one request on its own connection to socket, within
// timeout: every question to another tenant is bounded.
func request[T any](ctx context.Context, timeout time.Duration, socket string, do func(*control.Client, context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := control.Dial(ctx, socket)
	if err != nil {
		var zero T
		return zero, err
	}
	defer cl.Close()
	return do(cl, ctx)
}

// socket is the control socket of the instance name in the runtime dir.
func (c *Coordinator) socket(name string) string { return paths.Socket(c.o.RuntimeDir, name) }

// clampInfo holds what a peer published to the ranges policy validation
// allows, so that a forged file ranks no lower than priority -1000 and
// claims no longer cadence than a policy could.
func clampInfo(t *api.TenantInfo) {
	t.Priority = min(max(t.Priority, -policy.MaxPriority), policy.MaxPriority)
	t.GraceSeconds = clampSeconds(t.GraceSeconds, 0, policy.MaxDuration)
	t.SettleSeconds = clampSeconds(t.SettleSeconds, 0, policy.MaxDuration)
}
