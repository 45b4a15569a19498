package control

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// problemList is an error made of several, as policy.ErrorList is.
type problemList []error

func (l problemList) Error() string   { return "2 problems" }
func (l problemList) Unwrap() []error { return l }

// fakeReloader is a fakeBackend that reloads with a scripted result.
type fakeReloader struct {
	*fakeBackend
	changed []string
	err     error
}

func (f *fakeReloader) Reload(context.Context) ([]string, error) { return f.changed, f.err }

func TestReloadRequest(t *testing.T) {
	refused := fmt.Errorf("instance refused the reload: %w", problemList{
		errors.New("p.toml:3: watermark.high: must be below watermark.critical (0.97), got 0.99"),
		errors.New("p.toml:7: name: changed from \"a\" to \"b\""),
	})
	for _, tt := range []struct {
		name string
		b    Backend
		want map[string]any
	}{
		{"applied", &fakeReloader{fakeBackend: newFakeBackend(), changed: []string{"watermark.high", "profile"}},
			map[string]any{"ok": true, "id": 3.0, "changed": []any{"watermark.high", "profile"}}},
		{"nothing changed is an empty list", &fakeReloader{fakeBackend: newFakeBackend()},
			map[string]any{"ok": true, "id": 3.0, "changed": []any{}}},
		{"refused lists every problem", &fakeReloader{fakeBackend: newFakeBackend(), err: refused},
			map[string]any{"ok": false, "id": 3.0, "error": refused.Error(), "errors": []any{
				"p.toml:3: watermark.high: must be below watermark.critical (0.97), got 0.99",
				"p.toml:7: name: changed from \"a\" to \"b\""}}},
		{"failed otherwise: no list", &fakeReloader{fakeBackend: newFakeBackend(), err: errors.New("instance is shutting down")},
			map[string]any{"ok": false, "id": 3.0, "error": "instance is shutting down"}},
		{"a backend that cannot reload", newFakeBackend(),
			map[string]any{"ok": false, "id": 3.0, "error": "reload: not supported by this instance"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, tt.b, nil)
			if got := dialRaw(t, s.Path()).roundTrip(`{"type":"reload","id":3}`); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("reply %v\nwant  %v", got, tt.want)
			}
		})
	}
}

func TestClientReload(t *testing.T) {
	ctx := context.Background()
	b := &fakeReloader{fakeBackend: newFakeBackend(), changed: []string{"priority"}}
	s := serve(t, b, nil)
	c, err := Dial(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.Reload(ctx); err != nil || !slices.Equal(got, []string{"priority"}) {
		t.Fatalf("Reload = %q, %v", got, err)
	}
	b.changed = nil
	if got, err := c.Reload(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Reload with nothing changed = %#v, %v; want an empty list", got, err)
	}
	b.err = problemList{errors.New("p.toml:1: name: bad")}
	_, err = c.Reload(ctx)
	var re *RemoteError
	if !errors.As(err, &re) || re.Message != "2 problems" || !slices.Equal(re.Errors, []string{"p.toml:1: name: bad"}) {
		t.Fatalf("refused Reload: %#v", err)
	}
}
