package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHostilePolicies feeds Parse inputs built to hurt: each must be
// rejected with an ErrorList whose message says what is wrong (and, where
// there is one, which key on which line), without a panic. Time is not
// asserted; the inputs are sized so that quadratic work would show as a
// slow test.
func TestHostilePolicies(t *testing.T) {
	profiles := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[profile]]\nname = \"p%d\"\n", i)
		}
		return b.String()
	}
	envs := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%dX = \"y\"\n", i)
		}
		return b.String()
	}
	nested := func(depth int, open, close string) string {
		return "x = " + strings.Repeat(open, depth) + strings.Repeat(close, depth) + "\n"
	}
	deepTables := func(depth int) string {
		keys := make([]string, depth)
		for i := range keys {
			keys[i] = "t"
		}
		return "[" + strings.Join(keys, ".") + "]\nk = 1\n"
	}
	tests := []struct {
		name string
		src  string
		key  string // "" when the problem has no key (syntax, size)
		want string
	}{
		{"10,000 profiles", profiles(10_000), "profile", "10000 profiles; a ladder may have at most 256"},
		{"257 profiles", profiles(257), "profile", "257 profiles"},
		{"10,000 env vars", "[[profile]]\nname = \"a\"\n[profile.env]\n" + envs(10_000),
			"profile[0].env.0X", "invalid environment variable name"},
		{"10 MB file", strings.Repeat("# padding\n", 1_000_000), "", "file is 10000000 bytes; a policy may be at most 1 MiB"},
		{"just over the limit", strings.Repeat("#", MaxFileSize+1), "", "a policy may be at most 1 MiB"},
		{"absurd sustain", "[watermark]\nsustain = \"876000h\"", "watermark.sustain", "at most 30d"},
		{"overflowing interval", "[watch]\ninterval = \"9999999999999999h\"", "watch.interval", "invalid duration"},
		{"absurd lost_after", "[watch]\nlost_after = \"100000h\"", "watch.lost_after", "at most 30d"},
		{"negative backoff", "[restart]\nbackoff = \"-1ns\"", "restart.backoff", "must not be negative"},
		{"nanosecond interval", "[watch]\ninterval = \"1ns\"", "watch.interval", "at least 1ms"},
		{"huge size", "[[profile]]\nname = \"a\"\nneeds = \"99999999999999999999TiB\"", "profile[0].needs", ""},
		{"env name with =", "[[profile]]\nname = \"a\"\nenv = { \"A=B\" = \"1\" }", `profile[0].env."A=B"`, "invalid environment variable name"},
		{"env name with space", "[[profile]]\nname = \"a\"\nenv = { \"A B\" = \"1\" }", `profile[0].env."A B"`, "invalid environment variable name"},
		{"empty env name", "[[profile]]\nname = \"a\"\nenv = { \"\" = \"1\" }", `profile[0].env.""`, "invalid environment variable name"},
		{"env name starting with a digit", "[[profile]]\nname = \"a\"\nenv = { 9LIVES = \"1\" }", "profile[0].env.9LIVES", "invalid environment variable name"},
		{"env name with dash", "[[profile]]\nname = \"a\"\nenv = { MAX-BATCH = \"1\" }", "profile[0].env.MAX-BATCH", "invalid environment variable name"},
		{"reserved env name", "[[profile]]\nname = \"a\"\nenv = { GPUGUARD_PROFILE = \"x\" }", "profile[0].env.GPUGUARD_PROFILE", "reserved"},
		{"unknown var in command", "command = [\"x\", \"${NOPE}\"]", "command[1]", "NOPE"},
		{"33 nested arrays", nested(33, "[", "]"), "", "nested more than 32 deep"},
		{"100,000 nested arrays", nested(100_000, "[", "]"), "", "nested more than 32 deep"},
		{"250,000 nested inline tables", "x = " + strings.Repeat("{a=", 250_000) + "1" + strings.Repeat("}", 250_000), "", "nested more than 32 deep"},
		{"nesting inside a known key", "[[profile]]\nname = \"a\"\nenv = { A = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + " }", "", "nested more than 32 deep"},
		{"1,000 dotted table levels", deepTables(1_000), "", "a dotted key of more than 32 parts"},
		{"32 dotted table levels", deepTables(32), "t", "unknown key"},
		{"1,000 dotted keys", "[watch]\n" + strings.Repeat("k.", 1000) + "k = 1", "", "a dotted key of more than 32 parts"},
		{"32 dotted keys", "[watch]\n" + strings.Repeat("k.", 31) + "k = 1", "watch.k", "unknown key"},
		{"NUL byte in a string", "name = \"a\x00b\"", "", ""},
		{"NUL byte in an env value", "[[profile]]\nname = \"a\"\nenv = { A = \"x\\u0000y\" }", "profile[0].env.A", "NUL"},
		{"NUL byte in the command", "command = [\"a\\u0000b\"]", "command[0]", "NUL"},
		{"NUL byte alone", "\x00", "", "invalid TOML"},
		{"invalid UTF-8 in a string", "name = \"\xff\xfe\"", "", "invalid TOML"},
		{"invalid UTF-8 in a comment", "# \xc3\x28\nname = \"a\"", "", "invalid TOML"},
		{"invalid UTF-8 key", "[watch]\n\xffinterval = \"1s\"", "", "invalid TOML"},
		{"overlong name", "name = \"" + strings.Repeat("n", 100_000) + "\"", "name", ""},
		{"name with a slash", "name = \"../../etc\"", "name", ""},
		{"10,000 OOM patterns", "[oom]\npatterns = [" + strings.Repeat("\"x\",", 10_000) + "]", "oom.patterns", "at most 256"},
		{"OOM pattern with huge repeats", "[oom]\npatterns = [\"" + strings.Repeat("(a|b)*c{1,1000}", 1000) + "\"]", "oom.patterns[0]", "too complex"},
		{"256 OOM patterns, too complex together", "[oom]\npatterns = [" + strings.Repeat("\"x{1,1000}\",", 256) + "]", "oom.patterns[5]", "too complex"},
		{"32,000-part dotted key", "a" + strings.Repeat(".a", 32_000) + " = 1", "", "a dotted key of more than 32 parts"},
		{"33-part table header", "[a" + strings.Repeat(".a", 32) + "]", "", "a dotted key of more than 32 parts"},
		{"catastrophic-looking RE2", "[oom]\npatterns = [\"(a*)*$\"]", "oom.patterns[0]", "matches the empty string"},
		{"10,000 exit codes out of range", "[oom]\nexit_codes = [" + strings.Repeat("300,", 10_000) + "]", "oom.exit_codes[0]", "between 1 and 255"},
		{"200 duplicate names", strings.Repeat("[[profile]]\nname = \"same\"\n", 200), "profile[1].name", "duplicate profile name"},
		{"ratio infinity", "[watermark]\nhigh = inf", "watermark.high", "at most 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.src), "hostile.toml")
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "hostile.toml") {
				t.Errorf("error does not name the file: %.200s", msg)
			}
			if len(msg) > 64<<10 {
				t.Errorf("error is %d bytes; it must stay readable", len(msg))
			}
			if tt.key != "" && list[0].Key != tt.key {
				t.Errorf("first problem at key %q, want %q: %.300s", list[0].Key, tt.key, msg)
			}
			if tt.key != "" && list[0].Line <= 0 {
				t.Errorf("no line for key %q: %.300s", tt.key, msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %.300q does not say %q", msg, tt.want)
			}
		})
	}
}

// TestNestingIgnoresStringsAndComments: brackets inside strings and
// comments do not count, so a valid policy is never rejected as deep.
func TestNestingIgnoresStringsAndComments(t *testing.T) {
	deep := strings.Repeat("[{", 40)
	src := "# " + deep + "\n" +
		`command = ["` + deep + `", '` + deep + `', "\"` + deep + `", '\', "\\"]` + "\n" +
		`name = "x" # ` + deep + "\n" +
		"[[profile]]\nname = \"a\"\n" +
		`env = { A = """` + "\n" + deep + "\n" + `\"""""", B = '''` + deep + "\n" + `'''' }` + "\n" +
		"[[profile]]\nname = \"b\"\n"
	p, err := Parse([]byte(src), "ok.toml")
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	if got, want := p.Profiles[0].Env["A"], deep+"\n\"\"\""; got != want {
		t.Errorf("env A = %q, want %q", got, want)
	}
	if got, want := p.Profiles[0].Env["B"], deep+"\n'"; got != want {
		t.Errorf("env B = %q, want %q", got, want)
	}
	if len(p.Command) != 5 || p.Command[0] != deep || p.Command[2] != `"`+deep || p.Command[3] != `\` {
		t.Errorf("command %q", p.Command)
	}
	// Exactly maxDepth levels (and key parts) are fine, and floats,
	// times and dotted strings are not keys.
	src = "[watermark]\nhigh = 0.95 # a.b.c.d\nsustain = \"1.5s\"\n[[profile]]\nname = \"x\"\nenv = { A = \"" + strings.Repeat("a.", 100) + "\", B = 1.5 }\n[oom]\nexit_codes = [1, 2]\n\n"
	if _, err := Parse([]byte(src), "ok.toml"); err != nil {
		t.Errorf("%v\n%s", err, src)
	}
	if e := checkNesting("f", []byte("a"+strings.Repeat(".a", maxDepth-1)+" = 1")); e != nil {
		t.Errorf("%d key parts rejected: %v", maxDepth, e)
	}
	// Exactly maxDepth levels are fine.
	if e := checkNesting("f", []byte("x = "+strings.Repeat("[", maxDepth)+strings.Repeat("]", maxDepth))); e != nil {
		t.Errorf("%d levels rejected: %v", maxDepth, e)
	}
	src = "a = 1\nb = '''\n[[[\n'''\nc = \"\"\"\n{{{\"\"\"\nx = " + strings.Repeat("{", maxDepth+1)
	if e := checkNesting("f", []byte(src)); e == nil || e.Line != 7 {
		t.Errorf("too deep on line 7: %v", e)
	}
}
