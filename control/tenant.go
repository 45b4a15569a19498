package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gpuguard/gpuguard/api"
)

// Request types for shared GPUs. `ready` is public (the child says it has
// finished starting); the others are internal, between the gpuguard
// instances that share a GPU, and may change between versions.
const (
	TypeReady          = "ready"
	TypeTenant         = "tenant"
	TypeTenantStep     = "tenant_step"
	TypeTenantDecision = "tenant_decision"
	TypeTenantSleep    = "tenant_sleep"
)

// Tenancy is what a Backend answers for the shared-GPU requests. It is
// separate from Backend so that a backend without tenants still serves
// the rest; such a backend refuses these requests.
type Tenancy interface {
	// TenantInfo answers `tenant` from a published snapshot: it must not
	// wait for the supervisor's loop.
	TenantInfo() api.TenantInfo
	// TenantStep executes a decision another tenant took for this one,
	// or refuses it (the claim is stale, or this instance cannot step).
	TenantStep(ctx context.Context, st api.TenantStep) (api.TenantDecision, error)
	// TenantDecision notes a decision another tenant executed.
	TenantDecision(ctx context.Context, d api.TenantDecision) error
	// TenantSleep is another tenant's ask that this one sleep to make
	// room for it: accepted as the sleep begins, or refused with why.
	TenantSleep(ctx context.Context, ts api.TenantSleep) error
	// Ready records that the child has finished starting.
	Ready(ctx context.Context) error
}

// decodeTenant decodes the shared-GPU request types into req; handled is
// false for any other type.
func decodeTenant(typ string, line []byte, req *request) (handled bool, err error) {
	switch typ {
	case TypeReady, TypeTenant:
		return true, nil
	case TypeTenantStep:
		if err := json.Unmarshal(line, &req.TenantStep); err != nil {
			return true, fmt.Errorf("tenant_step: %v", err)
		}
		st := req.TenantStep
		if st.GPU == "" || st.Seq <= 0 || st.By == "" || st.At <= 0 || !validKind(st.Kind) {
			return true, errors.New(`tenant_step: "gpu", "seq" > 0, "by", "at" > 0 and a valid "kind" are required`)
		}
		return true, nil
	case TypeTenantDecision:
		if err := json.Unmarshal(line, &req.TenantDecision); err != nil {
			return true, fmt.Errorf("tenant_decision: %v", err)
		}
		d := req.TenantDecision
		if d.GPU == "" || d.Seq <= 0 || d.To == "" || d.At <= 0 || !validKind(d.Kind) || d.GraceSeconds < 0 {
			return true, errors.New(`tenant_decision: "gpu", "seq" > 0, "to", "at" > 0, "grace_seconds" >= 0 and a valid "kind" are required`)
		}
		return true, nil
	case TypeTenantSleep:
		if err := json.Unmarshal(line, &req.TenantSleep); err != nil {
			return true, fmt.Errorf("tenant_sleep: %v", err)
		}
		ts := req.TenantSleep
		if ts.GPU == "" || ts.For == "" || ts.At <= 0 {
			return true, errors.New(`tenant_sleep: "gpu", "for" and "at" > 0 are required`)
		}
		return true, nil
	}
	return false, nil
}

func validKind(k string) bool {
	return k == api.KindDown || k == api.KindPredicted || k == api.KindCritical || k == api.KindUp
}

type tenantReply struct {
	OK bool            `json:"ok"`
	ID json.RawMessage `json:"id,omitempty"`
	api.TenantInfo
}

type decisionReply struct {
	OK bool            `json:"ok"`
	ID json.RawMessage `json:"id,omitempty"`
	api.TenantDecision
}

// handleTenant answers the shared-GPU request types; handled is false for
// any other type.
func (c *conn) handleTenant(ctx context.Context, b Backend, req request) (handled, alive bool) {
	switch req.Type {
	case TypeReady, TypeTenant, TypeTenantStep, TypeTenantDecision, TypeTenantSleep:
	default:
		return false, true
	}
	t, ok := b.(Tenancy)
	if !ok {
		return true, c.write(errorLine(req.ID, fmt.Errorf("%s: not supported by this instance", req.Type))) == nil
	}
	var reply any = okReply{OK: true, ID: req.ID}
	var err error
	switch req.Type {
	case TypeTenant:
		info := t.TenantInfo()
		if info.GPUs == nil {
			info.GPUs = []api.TenantGPU{}
		}
		reply = tenantReply{OK: true, ID: req.ID, TenantInfo: info}
	case TypeTenantStep:
		var d api.TenantDecision
		d, err = t.TenantStep(ctx, req.TenantStep)
		reply = decisionReply{OK: true, ID: req.ID, TenantDecision: d}
	case TypeTenantDecision:
		err = t.TenantDecision(ctx, req.TenantDecision)
	case TypeTenantSleep:
		err = t.TenantSleep(ctx, req.TenantSleep)
	case TypeReady:
		err = t.Ready(ctx)
	}
	if err != nil {
		return true, c.write(errorLine(req.ID, err)) == nil
	}
	return true, c.write(encodeLine(reply)) == nil
}

// Ready tells the instance that its child has finished starting.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.call(ctx, map[string]any{"type": TypeReady})
	return err
}

// Tenant asks an instance what it tells the other tenants of its GPUs.
func (c *Client) Tenant(ctx context.Context) (api.TenantInfo, error) {
	var info api.TenantInfo
	line, err := c.call(ctx, map[string]any{"type": TypeTenant})
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(line, &info); err != nil {
		return info, fmt.Errorf("bad tenant reply from %s: %w", c.path, err)
	}
	return info, nil
}

// TenantStep asks an instance to execute decision st; a refusal is a
// *RemoteError.
func (c *Client) TenantStep(ctx context.Context, st api.TenantStep) (api.TenantDecision, error) {
	var d api.TenantDecision
	line, err := c.call(ctx, struct {
		Type string `json:"type"`
		api.TenantStep
	}{TypeTenantStep, st})
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(line, &d); err != nil {
		return d, fmt.Errorf("bad tenant_step reply from %s: %w", c.path, err)
	}
	return d, nil
}

// TenantDecision tells an instance about a decision another tenant executed.
func (c *Client) TenantDecision(ctx context.Context, d api.TenantDecision) error {
	_, err := c.call(ctx, struct {
		Type string `json:"type"`
		api.TenantDecision
	}{TypeTenantDecision, d})
	return err
}

// TenantSleep asks an instance to sleep to make room for another (ts);
// a refusal is a *RemoteError saying why.
func (c *Client) TenantSleep(ctx context.Context, ts api.TenantSleep) error {
	_, err := c.call(ctx, struct {
		Type string `json:"type"`
		api.TenantSleep
	}{TypeTenantSleep, ts})
	return err
}
