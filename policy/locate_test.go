package policy

import "testing"

func TestIndexLines(t *testing.T) {
	src := `# a comment with [brackets] and key = "value"
name = "x" # trailing [comment]
command = [
  "serve",   # first
  """
multi = "line" ]
[fake]
""",
  '''literal
[[fake]]''',
  'C:\path\',
]
desc.a."b.c" = 'q'
[watch]
  interval = "1s"
[ "quoted table" . inner ]
k = 1
[[profile]]
name = "a"
env = { A = "1", B = { C = 2 } }
[[profile]]
name = "b"
[profile.env]
X = "\"}]"
Y = 1979-05-27 07:32:00
[[profile.sub]]
z = 1
[[profile]]
name = "c"
nested = [[1, 2], [
  3]]
inline = [ { n = 1 },
  { n = 2 } ]
`
	x := indexLines([]byte(src))
	tests := []struct {
		p    path
		want int
	}{
		{path{"name"}, 2},
		{path{"command"}, 3},
		{path{"command", "[0]"}, 4},
		{path{"command", "[1]"}, 5},
		{path{"command", "[2]"}, 9},
		{path{"command", "[3]"}, 11},
		{path{"multi"}, 0},
		{path{"fake"}, 0},
		{path{"desc", "a", "b.c"}, 13},
		{path{"desc", "a"}, 13},
		{path{"watch"}, 14},
		{path{"watch", "interval"}, 15},
		{path{"watch", "nope"}, 14}, // falls back to the table
		{path{"quoted table", "inner", "k"}, 17},
		{path{"profile"}, 18},
		{path{"profile", "[0]"}, 18},
		{path{"profile", "[0]", "name"}, 19},
		{path{"profile", "[0]", "env", "A"}, 20},
		{path{"profile", "[0]", "env", "B", "C"}, 20},
		{path{"profile", "[1]", "name"}, 22},
		{path{"profile", "[1]", "env"}, 23},
		{path{"profile", "[1]", "env", "X"}, 24},
		{path{"profile", "[1]", "env", "Y"}, 25},
		{path{"profile", "[1]", "sub", "[0]", "z"}, 27},
		{path{"profile", "[2]", "name"}, 29},
		{path{"profile", "[2]", "nested", "[1]", "[0]"}, 31},
		{path{"profile", "[2]", "inline", "[1]", "n"}, 33},
		{path{"profile", "[3]", "name"}, 18}, // no such element: the array
		{path{"missing"}, 0},
	}
	for _, tt := range tests {
		if got := x.line(tt.p); got != tt.want {
			t.Errorf("line(%s) = %d, want %d", tt.p, got, tt.want)
		}
	}
}

func TestIndexLinesSurvivesGarbage(t *testing.T) {
	for _, src := range []string{"", "[", "[[", "a", "a =", "a = \"", "a = '''", "a = [", "a = {", "a = { b", `"`, "= 1", "[a.]", "a = [[[[", "\x00"} {
		indexLines([]byte(src)).line(path{"a"})
	}
}

func TestPathString(t *testing.T) {
	tests := []struct {
		p    path
		want string
	}{
		{nil, ""},
		{path{"watch", "interval"}, "watch.interval"},
		{path{}.key("profile").index(2).key("env").key("DTYPE"), "profile[2].env.DTYPE"},
		{path{"env", "a b"}, `env."a b"`},
		{path{"oom", "patterns"}.index(0), "oom.patterns[0]"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}
