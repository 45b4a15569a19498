package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain /v1/completions", "plain /v1/completions"},
		{"int8→int4 ünïcödé 日本", "int8→int4 ünïcödé 日本"},
		{`C:\path\x1b kept`, `C:\path\x1b kept`},
		{"\x1b]0;pwned\a\x1b[2J", `\x1b]0;pwned\a\x1b[2J`},
		{"a\nb\tc\rd\be\ff\vg", `a\nb\tc\rd\be\ff\vg`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad \x9b\xff utf8", `bad \x9b\xff utf8`},
		{"cut \xe6\x97", `cut \xe6\x97`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEscapeLeavesNothingRaw: whatever the input, the output is valid
// UTF-8 with no control character, and plain text comes back unchanged.
func TestEscapeLeavesNothingRaw(t *testing.T) {
	var all strings.Builder
	for b := 0; b < 256; b++ {
		all.WriteByte(byte(b))
	}
	for r := rune(0x80); r < 0x3000; r++ {
		all.WriteRune(r)
	}
	out := Escape(all.String())
	if !utf8.ValidString(out) {
		t.Fatal("the output is not UTF-8")
	}
	for _, r := range out {
		if !safe(r) {
			t.Fatalf("%U is left raw", r)
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("\x1b[2J")
	f.Add("ok")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q is not UTF-8", s, out)
		}
		for _, r := range out {
			if !safe(r) {
				t.Fatalf("Escape(%q) leaves %U raw", s, r)
			}
		}
		if firstUnsafe(s) < 0 && out != s {
			t.Fatalf("Escape(%q) changed safe text", s)
		}
	})
}

func BenchmarkEscapePlain(b *testing.B) {
	s := strings.Repeat("the replay failed: the model server answered 500 ", 4)
	b.ReportAllocs()
	for b.Loop() {
		_ = Escape(s)
	}
}
