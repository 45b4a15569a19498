package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sharedEmbedPolicy is an embedder behind a front door that sleeps through
// vLLM's API. %s: listen, upstream.
const sharedEmbedPolicy = quickTables + `[serve]
listen = "%s"
upstream = "http://%s"
health = "/health"
hold = "60s"
` + vllmSleepLadder

// tenantEvents are the journal lines of event name in a tenant's state dir.
func tenantEvents(e *env, tenant, name string) []string {
	return journalEvents(filepath.Join(e.stateDir, tenant, "events.jsonl"), name)
}

// TestSleepingTenantSparesTheLLM: an embedder (priority -10) that can
// sleep through its server's API and an LLM (priority 10) share one GPU.
// When a neighbour pushes the GPU over high, the lower-priority embedder
// is the one to step: it sleeps (no restart, its memory leaves the GPU),
// and the LLM does not step at all; it journals the embedder's step as a
// yield.
func TestSleepingTenantSparesTheLLM(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t, "vllm_fake.py")
	e := newEnv(t)
	door, child := freeLoopbackAddr(t), freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(child)
	script := fmt.Sprintf("exec /usr/bin/python3 %s %s 1 %d %d\n", fake, port, fakeAwake, fakeAsleep)
	embed := e.startTenant("embed", -10, fmt.Sprintf(sharedEmbedPolicy, door, child), script, "VLLM_SERVER_DEV_MODE=1")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("embed's stderr:\n%s", embed.stderr.String())
		}
	})
	waitFor(t, "the embedder's ready event", 60*time.Second, func() bool { return len(tenantEvents(e, "embed", "ready")) == 1 })
	// The LLM: 8 GiB in its first profile, 4 GiB in its second.
	use := func(l int) uint64 { return uint64(8>>l) << 30 }
	llm := e.startTenant("llm", 10, tenantPolicy(2, use, `recover_after = "0s"`), tenantChild)
	e.waitRunning("embed", "llm")
	embedStatus, err := e.statusOf("embed")
	if err != nil {
		t.Fatal(err)
	}
	pid := embedStatus.ChildPID

	// 4 GiB (embed) + 8 GiB (llm) + 3 GiB = 15 GiB of 16: over high (14.4).
	if err := os.WriteFile(filepath.Join(e.path("sim"), "0", "neighbour"), []byte(strconv.Itoa(3<<30)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the embedder asleep", 30*time.Second, func() bool {
		st, err := e.statusOf("embed")
		return err == nil && st.State == "asleep"
	})
	downs := tenantEvents(e, "embed", "stepdown")
	if len(downs) != 1 || !strings.Contains(downs[0], `"to":"asleep"`) || !strings.Contains(downs[0], `"reason":"watermark"`) {
		t.Fatalf("embed's stepdown events %v, want one to asleep, reason watermark", downs)
	}
	if acts := tenantEvents(e, "embed", "action"); len(acts) != 1 || !strings.Contains(acts[0], `"path":"/sleep?level=1`) {
		t.Errorf("embed's action events %v, want the one sleep", acts)
	}
	if st, _ := e.statusOf("embed"); st.ChildPID != pid {
		t.Errorf("embed's child %d after the sleep, want the same %d (no restart)", st.ChildPID, pid)
	}
	// Once the LLM has seen the GPU below high, no step can come from this
	// crossing any more: it must not have stepped.
	waitFor(t, "the LLM to see the GPU below high", 30*time.Second, func() bool {
		st, err := e.statusOf("llm")
		return err == nil && st.Watermark > 0 && st.Watermark < 0.90
	})
	if st, _ := e.statusOf("llm"); st.Level != 0 || len(tenantEvents(e, "llm", "stepdown")) != 0 || len(tenantEvents(e, "llm", "restart")) != 0 {
		t.Fatalf("the LLM stepped: level %d, stepdowns %v", st.Level, tenantEvents(e, "llm", "stepdown"))
	}
	if y := tenantEvents(e, "llm", "yield"); len(y) != 1 || !strings.Contains(y[0], `"embed"`) {
		t.Errorf("the LLM's yield events %v, want one naming embed", y)
	}
	for _, p := range []*proc{embed, llm} {
		p.signal(sigterm)
		p.wait()
	}
}
