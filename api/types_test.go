package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReloadChangedEncoding: an applied reload that changed nothing is
// journaled with "changed":[] (docs/operations.md), and any other event
// carries no "changed" at all.
func TestReloadChangedEncoding(t *testing.T) {
	for _, c := range []struct {
		ev   Event
		want string // "" when "changed" must be absent
	}{
		{Event{Event: EventReload, Changed: []string{}}, `"changed":[]`},
		{Event{Event: EventReload, Changed: []string{"watermark.high"}}, `"changed":["watermark.high"]`},
		{Event{Event: EventReload, Reason: ReasonError, Detail: "p.toml:1: name: bad"}, ""},
		{Event{Event: EventStart}, ""},
	} {
		b, err := json.Marshal(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); c.want == "" && strings.Contains(got, `"changed"`) || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%+v encodes as %s; want %q", c.ev, got, c.want)
		}
	}
}
