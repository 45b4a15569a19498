package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestPublicKeepsFiveFields fills every field of an event, those
// added later too (by reflection), and checks that the public status
// keeps time, event, profile, level and reason and nothing else, and that
// the instance's own status is left as it was.
func TestPublicKeepsFiveFields(t *testing.T) {
	ev := &Event{}
	fill(reflect.ValueOf(ev).Elem())
	ev.Time, ev.Event, ev.Profile, ev.Level, ev.Reason = time.Unix(1, 0), EventDeferred, "fp16", 1, "watermark"
	ev.Ticket = "t-secret"
	st := Status{Name: "llama", LastEvent: ev}

	pub := st.Public()
	b, err := json.Marshal(pub.LastEvent)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"time", "event", "profile", "level", "reason"}
	for k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("the public last_event has %q: %s", k, b)
		}
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("the public last_event lacks %q: %s", k, b)
		}
	}
	if st.LastEvent.Ticket != "t-secret" || pub.Name != "llama" {
		t.Errorf("the instance's own status changed: %+v", st.LastEvent)
	}
	if (Status{}).Public().LastEvent != nil {
		t.Error("no last event became one")
	}
}

// fill sets every settable field of v to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(7)
	case reflect.Float64, reflect.Float32:
		v.SetFloat(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}
