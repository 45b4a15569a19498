package policy

import (
	"fmt"
	"strings"
)

// profiles decodes the [[profile]] ladder, replacing the implied
// "default" profile.
func (d *decoder) profiles(pol *Policy, p path, v any, names map[string][]string) {
	elems, ok := v.([]map[string]any)
	if !ok {
		arr, isArr := v.([]any)
		if !isArr {
			d.out.errorf(p, "must be an array of tables: write each profile as a [[profile]] section, got %s", describe(v))
			return
		}
		for i, e := range arr {
			m, ok := e.(map[string]any)
			if !ok {
				d.out.errorf(p.index(i), "must be a table with name, needs, live and env, got %s", describe(e))
				return
			}
			elems = append(elems, m)
		}
	}
	switch {
	case len(elems) == 0:
		d.out.errorf(p, "must hold at least one profile (leave it out for a single profile named \"default\")")
		return
	case len(elems) > MaxProfiles:
		d.out.errorf(p, "%d profiles; a ladder may have at most %d", len(elems), MaxProfiles)
		return
	}
	ladder := make([]Profile, len(elems))
	seen := make(map[string]int, len(elems))
	for i, m := range elems {
		pp := p.index(i)
		prof := &ladder[i]
		prof.Env = map[string]string{}
		d.table(pp, m, d.profileFields(prof), names)
		if _, ok := m["name"]; !ok {
			d.out.errorf(pp, "missing name")
			continue
		}
		if prof.Name == "" {
			continue // already reported
		}
		if j, dup := seen[prof.Name]; dup {
			d.out.errorf(pp.key("name"), "duplicate profile name %q (also profile[%d])", prof.Name, j)
			continue
		}
		seen[prof.Name] = i
	}
	pol.Profiles = ladder
}

func (d *decoder) profileFields(prof *Profile) []field {
	return []field{
		{"name", func(p path, v any) {
			if s, ok := d.val.str(p, v); ok {
				if err := validName(s); err != nil {
					d.out.fail(p, err, "profile name "+err.Error())
					return
				}
				prof.Name = s
			}
		}},
		{"needs", set(&prof.Needs, d.val.size)},
		{"live", set(&prof.Live, d.val.boolean)},
		{"env", func(p path, v any) { d.env(prof, p, v) }},
		{"serving", func(p path, v any) {
			if b, ok := d.val.boolean(p, v); ok {
				prof.NotServing = !b
			}
		}},
		{"enter", set(&prof.Enter, d.actionList)},
		{"leave", set(&prof.Leave, d.actionList)},
	}
}

// env reads a profile's environment. Values may be strings, or numbers
// and booleans, which are written as TOML would print them: MAX_BATCH = 32
// is "32".
func (d *decoder) env(prof *Profile, p path, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		d.out.errorf(p, "must be a table such as { DTYPE = \"float16\" }, got %s", describe(v))
		return
	}
	for k, val := range m {
		kp := p.key(k)
		switch {
		case !validEnvName(k):
			d.out.errorf(kp, "invalid environment variable name %q: use letters, digits and _, not starting with a digit", k)
			continue
		case strings.HasPrefix(k, "GPUGUARD_"):
			d.out.errorf(kp, "%s is reserved: gpuguard sets the GPUGUARD_* variables itself", k)
			continue
		}
		var s string
		switch x := val.(type) {
		case string:
			s = x
		case int64, float64, bool:
			s = fmt.Sprint(x)
		default:
			d.out.errorf(kp, "must be a string, number or boolean, got %s", describe(val))
			continue
		}
		if strings.ContainsRune(s, 0) {
			d.out.errorf(kp, "must not contain a NUL byte")
			continue
		}
		prof.Env[k] = s
	}
}

// validName checks a profile name. Profile names appear in metric labels,
// --profile and $GPUGUARD_PROFILE, so they are limited to 1 to 64 letters,
// digits, '.', '_' and '-', not starting with '.' or '-'.
func validName(name string) error {
	bad := name == "" || len(name) > 64 || name[0] == '.' || name[0] == '-'
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		bad = !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
	}
	if bad {
		return fmt.Errorf("%q must be 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'", name)
	}
	return nil
}
