package e2e

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestDoorTicketOnlyToItsClientSQLite and ...Redis are issue 42's first attack: right after a
// deferral, anyone who can reach the door read the deferred event, ticket
// and all, on the status path, and with it the other client's result.
// Now the ticket is in no answer but the 202 to its own client: the
// status path's last_event keeps time, event, profile, level and reason;
// nor is it in another client's 202, a 404, the metrics or a P0 answer.
//
// The controls: the status path's last_event is the deferral's own event
// (so the look came at the moment of the leak), and the control socket,
// which only the instance's user reaches, still shows the ticket (so the
// search finds a ticket where one is).
//
// It runs on each store (issue 42's eighth item: Redis had the same hole).
func TestDoorTicketOnlyToItsClientSQLite(t *testing.T) {
	t.Parallel()
	testDoorTicketOnlyToItsClient(t, "")
}

func TestDoorTicketOnlyToItsClientRedis(t *testing.T) {
	t.Parallel()
	testDoorTicketOnlyToItsClient(t, redisDeferKeys(t))
}

func testDoorTicketOnlyToItsClient(t *testing.T, store string) {
	d := startDeferDoor(t, deferDoorOptions{metrics: true, deferKeys: store})
	allowed := []string{"time", "event", "profile", "level", "reason"}
	var ticket string
	var seen bool
	for try := 0; try < 10 && !seen; try++ {
		ticket = d.deferP2(t, "/v1/completions", []byte(`{"prompt":"a secret"}`))
		raw, hdr, st := d.doorStatus(t)
		ev, _ := st["last_event"].(map[string]any)
		if ev == nil || ev["event"] != "deferred" {
			continue // another event came between: look again
		}
		seen = true
		if text := answerText(hdr, raw); strings.Contains(text, ticket) || strings.Contains(text, ticket[2:]) {
			t.Errorf("the status path names the ticket %s:\n%s", ticket, text)
		}
		for k := range ev {
			if !slices.Contains(allowed, k) {
				t.Errorf("the status path's last_event has %q (%v); want only %v", k, ev[k], allowed)
			}
		}
		// The same uid's socket keeps the whole event.
		sock := dialInstance(t, d.e.runDir, "dq").call(map[string]any{"type": "status"})
		if sev, _ := sock["last_event"].(map[string]any); sev != nil && sev["event"] == "deferred" && sev["ticket"] != ticket {
			t.Errorf("the control socket's last_event %v, want the ticket %s (control)", sev, ticket)
		}
	}
	if !seen {
		t.Fatal("the status path never showed the deferred event as last_event (control)")
	}

	// Every other answer anyone can get.
	other := map[string]string{}
	_, hdr, body := httpDo(t, http.MethodGet, d.base+"/gpuguard/v1/status", nil)
	other["the status path, later"] = answerText(hdr, body)
	_, hdr, body = httpDo(t, http.MethodPost, d.base+"/v1/completions", []byte("x"), "X-GPUGuard-Priority", "P2")
	other["another client's 202"] = answerText(hdr, body)
	_, hdr, body = httpDo(t, http.MethodGet, d.base+"/gpuguard/v1/tasks/t-0123456789abcdef0123456789abcdef", nil)
	other["an unknown ticket's 404"] = answerText(hdr, body)
	_, hdr, body = httpDo(t, http.MethodGet, d.base+"/gpuguard/v1/", nil)
	other["a /gpuguard/ 404"] = answerText(hdr, body)
	_, hdr, body = httpDo(t, http.MethodPost, d.base+"/v1/completions", []byte("x"), "X-GPUGuard-Priority", "P0")
	other["a P0 answer"] = answerText(hdr, body)
	resp, err := http.Get("http://" + d.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	other["metrics"] = string(b)
	for what, text := range other {
		if strings.Contains(text, ticket[2:]) {
			t.Errorf("%s names the ticket %s:\n%s", what, ticket, text)
		}
	}
	// Its own client still reads it (the status URL is the ticket's).
	if code, hdr, _ := httpDo(t, http.MethodGet, d.base+"/gpuguard/v1/tasks/"+ticket, nil); code != http.StatusAccepted || hdr.Get("X-GPUGuard-Ticket") != ticket {
		t.Errorf("the ticket's own status URL: %d %v", code, hdr)
	}
}
