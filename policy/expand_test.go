package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestExpandArgs(t *testing.T) {
	vars := map[string]string{"MAX_BATCH": "32", "DTYPE": "float16", "EMPTY": "", "GPUGUARD_LEVEL": "1"}
	tests := []struct {
		in, want string
	}{
		{"plain", "plain"},
		{"${MAX_BATCH}", "32"},
		{"--batch=${MAX_BATCH}", "--batch=32"},
		{"${DTYPE}-${MAX_BATCH}", "float16-32"},
		{"${EMPTY}", ""},
		{"$$", "$"},
		{"$${MAX_BATCH}", "${MAX_BATCH}"},
		{"$$$$", "$$"},
		{"$HOME", "$HOME"},
		{"$", "$"},
		{"a$", "a$"},
		{"cost: 5$ ${MAX_BATCH}", "cost: 5$ 32"},
		{"level${GPUGUARD_LEVEL}", "level1"},
		{"$$${DTYPE}", "$float16"},
	}
	for _, tt := range tests {
		got, err := ExpandArgs([]string{tt.in}, vars)
		if err != nil || got[0] != tt.want {
			t.Errorf("ExpandArgs(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestExpandArgsDoesNotModifyInput(t *testing.T) {
	in := []string{"serve", "${X}"}
	out, err := ExpandArgs(in, map[string]string{"X": "y"})
	if err != nil || !slices.Equal(out, []string{"serve", "y"}) || in[1] != "${X}" {
		t.Fatalf("got %q, %v; input now %q", out, err, in)
	}
}

func TestExpandArgsErrors(t *testing.T) {
	vars := map[string]string{"A": "1"}
	_, err := ExpandArgs([]string{"serve", "--n", "${MAX_SEQS}"}, vars)
	var ue *UnknownVarError
	if !errors.As(err, &ue) || ue.Name != "MAX_SEQS" || ue.Index != 2 || ue.Arg != "${MAX_SEQS}" {
		t.Fatalf("err = %#v, want UnknownVarError for MAX_SEQS at 2", err)
	}
	if !strings.Contains(err.Error(), "${MAX_SEQS}") {
		t.Errorf("message %q does not name the variable", err)
	}
	for _, bad := range []string{"${A", "${}", "${1A}", "${A-B}", "x${A B}"} {
		_, err := ExpandArgs([]string{bad}, vars)
		var se *ArgSyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ExpandArgs(%q) err = %v, want *ArgSyntaxError", bad, err)
		}
	}
}

func TestCheckArgs(t *testing.T) {
	p, err := Parse([]byte(`
[[profile]]
name = "big"
env = { MAX_SEQS = "256", KV = "auto" }
[[profile]]
name = "small"
env = { MAX_SEQS = "32" }
`), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckArgs([]string{"vllm", "--max-num-seqs", "${MAX_SEQS}", "${GPUGUARD_CHECKPOINT}", "$$HOME"}); err != nil {
		t.Errorf("CheckArgs: %v", err)
	}
	for _, v := range ChildVars() {
		if err := p.CheckArgs([]string{"${" + v + "}"}); err != nil {
			t.Errorf("CheckArgs(${%s}): %v", v, err)
		}
	}
	err = p.CheckArgs([]string{"vllm", "--kv", "${KV}"})
	var ue *UnknownVarError
	if !errors.As(err, &ue) || ue.Name != "KV" || ue.Profile != "small" {
		t.Fatalf("err = %v, want unknown KV in profile small", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "KV") || !strings.Contains(msg, `"small"`) {
		t.Errorf("message %q should name KV and the profile", msg)
	}
}
