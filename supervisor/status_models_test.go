package supervisor

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/gpuguard/gpuguard/policy"
)

// TestStatusServeAndModels: with a front door the status object carries
// its listen address and the names `gpuguard door` routes by (the
// instance's name by default); a reload of [serve] models shows at once;
// without a door both are absent.
func TestStatusServeAndModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		withDoor := func(models ...string) *policy.Policy {
			p := testPolicy()
			p.Serve = policy.Serve{Listen: "127.0.0.1:8001", Upstream: "http://127.0.0.1:8002", Models: models}
			return p
		}
		fr := &fakeReloader{}
		h := startHarness(t, withDoor(), withReloader(fr, func(_ *Config, d *Deps) { d.Door = newFakeDoor() }))
		c := h.child()
		synctest.Wait()
		if st := h.sup.Status(); st.Serve != "127.0.0.1:8001" || !slices.Equal(st.Models, []string{"t"}) {
			t.Fatalf("serve %q models %q, want the door's address and the instance's name", st.Serve, st.Models)
		}
		reloadTo(t, h, fr, withDoor("qwen2.5-7b-instruct", "qwen"), "serve.models")
		synctest.Wait()
		if st := h.sup.Status(); !slices.Equal(st.Models, []string{"qwen2.5-7b-instruct", "qwen"}) {
			t.Fatalf("models after the reload %q", st.Models)
		}
		c.end(Exit{})
		h.wait()
	})
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		synctest.Wait()
		if st := h.sup.Status(); st.Serve != "" || st.Models != nil {
			t.Fatalf("without a door: serve %q models %q", st.Serve, st.Models)
		}
		c.end(Exit{})
		h.wait()
	})
}
