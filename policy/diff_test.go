package policy

import (
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"
)

// schemaKeys lists every key the decoder accepts, as Diff names them:
// "name", "watch.interval", ..., with the ladder as one key, "profile",
// last (where policy.toml documents it).
func schemaKeys() []string {
	d := newDecoder("", nil, parseOptions{})
	pol := Default()
	secs := d.sectionFields(pol)
	var keys []string
	for _, f := range d.topFields(pol, secs, nil) {
		fs, section := secs[f.name]
		switch {
		case section:
			for _, sf := range fs {
				keys = append(keys, f.name+"."+sf.name)
			}
		case f.name != "profile":
			keys = append(keys, f.name)
		}
	}
	return append(keys, "profile")
}

// TestDiffCoversSchema: every key policy.toml accepts has an entry in
// diffKeys, in the schema's order, and no entry names a key that does not
// exist. A key added to the schema without one fails here.
func TestDiffCoversSchema(t *testing.T) {
	var got []string
	for _, k := range diffKeys {
		got = append(got, k.key)
	}
	if want := schemaKeys(); !slices.Equal(got, want) {
		t.Fatalf("diffKeys:\n%q\nthe schema's keys:\n%q", got, want)
	}
}

// diffFixture is a policy whose slices and maps are not empty, built anew
// for each use so that changing one never changes another.
func diffFixture() *Policy {
	p := Default()
	p.Command = []string{"serve"}
	p.OOM.ExitCodes = []int{42}
	p.Profiles[0].Env["A"] = "1"
	act := func() []Action { return []Action{{Method: "POST", Path: "/a", Headers: map[string]string{"A": "1"}}} }
	p.Profiles[0].Enter, p.Profiles[0].Leave = act(), act()
	return p
}

// fieldPath leads from a Policy to one of its fields: a field index, or
// -1 for the first element of a slice.
type fieldPath struct {
	name  string
	steps []int
	// grow: the field is the ladder itself; the change adds a rung.
	grow bool
}

// policyFields lists every leaf field of Policy (and of its first
// profile), and the ladder itself.
func policyFields(t reflect.Type, name string, steps []int) []fieldPath {
	switch {
	case t.Kind() == reflect.Struct:
		var out []fieldPath
		for i := range t.NumField() {
			f := t.Field(i)
			if len(steps) == 0 && f.Name == "Source" {
				continue // where the policy came from, not a key
			}
			out = append(out, policyFields(f.Type, name+"."+f.Name, append(slices.Clone(steps), i))...)
		}
		return out
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return append(policyFields(t.Elem(), name+"[0]", append(slices.Clone(steps), -1)),
			fieldPath{name: name, steps: steps, grow: true})
	}
	return []fieldPath{{name: name, steps: steps}}
}

// TestDiffCoversEveryField changes each field of a Policy in turn (every
// leaf of every section and of a profile) and checks that Diff notices. A
// field added to Policy without a diff entry fails here.
func TestDiffCoversEveryField(t *testing.T) {
	fields := policyFields(reflect.TypeFor[Policy](), "Policy", nil)
	if len(fields) < len(diffKeys) {
		t.Fatalf("found %d fields, fewer than the %d keys", len(fields), len(diffKeys))
	}
	for _, f := range fields {
		b := diffFixture()
		v := reflect.ValueOf(b).Elem()
		for _, s := range f.steps {
			if s < 0 {
				v = v.Index(0)
			} else {
				v = v.Field(s)
			}
		}
		if f.grow {
			v.Set(reflect.Append(v, v.Index(0)))
		} else if !changeLeaf(v) {
			t.Errorf("%s: no way to change a %s here; teach changeLeaf", f.name, v.Type())
			continue
		}
		if got := Diff(diffFixture(), b); len(got) == 0 {
			t.Errorf("changing %s: Diff reports nothing (a key missing from diffKeys?)", f.name)
		}
	}
}

// changeLeaf gives v another value of its type.
func changeLeaf(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.01)
	case reflect.Slice:
		elem := reflect.Zero(v.Type().Elem())
		if v.Type().Elem() == reflect.TypeFor[*regexp.Regexp]() {
			elem = reflect.ValueOf(regexp.MustCompile("x"))
		}
		v.Set(reflect.Append(v, elem))
	case reflect.Map:
		v.SetMapIndex(reflect.ValueOf("NEW"), reflect.ValueOf("1"))
	default:
		return false
	}
	return true
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *Policy)
		want   []string
	}{
		{"nothing", func(p *Policy) {}, []string{}},
		{"a threshold", func(p *Policy) { p.Watermark.High = 0.8 }, []string{"watermark.high"}},
		{"in the documented order", func(p *Policy) {
			p.Journal.MaxFiles = 9
			p.Priority = 5
			p.Watch.Interval = time.Second
			p.Watermark.Low = 0.5
		}, []string{"priority", "watch.interval", "watermark.low", "journal.max_files"}},
		{"a rung's env", func(p *Policy) { p.Profiles[0].Env["A"] = "2" }, []string{"profile"}},
		{"a rung added", func(p *Policy) { p.Profiles = append(p.Profiles, Profile{Name: "low"}) }, []string{"profile"}},
		{"the same pattern compiled again", func(p *Policy) {
			p.OOM.Patterns = slices.Clone(p.OOM.Patterns)
			p.OOM.Patterns[0] = regexp.MustCompile(p.OOM.Patterns[0].String())
		}, []string{}},
		{"a signal", func(p *Policy) { p.Notify.Signal = 0 }, []string{"notify.signal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := diffFixture()
			tt.change(b)
			if got := Diff(diffFixture(), b); !slices.Equal(got, tt.want) || got == nil {
				t.Errorf("Diff = %q, want %q", got, tt.want)
			}
		})
	}
	// Env: nil and empty are the same ladder.
	a, b := Default(), Default()
	b.Profiles[0].Env = nil
	if got := Diff(a, b); len(got) != 0 {
		t.Errorf("an env left out differs from an empty one: %q", got)
	}
}

func TestLocate(t *testing.T) {
	src := []byte("name = \"llama\"\n\n[watch]\ninterval = \"1s\"\n\n[watermark]\nhigh = 0.8\n")
	for key, want := range map[string]int{
		"name": 1, "watch.interval": 4, "watch.backend": 3, "watermark.high": 7, "restart.backoff": 0,
	} {
		if got := Locate(src, key); got != want {
			t.Errorf("Locate(%q) = %d, want %d", key, got, want)
		}
	}
}
