package policy

import (
	"strings"
	"testing"
)

// TestBackendNamesFromOption: [watch] backend takes exactly the names the
// caller passes (cmd passes backends/open's table, and open's TestTable
// checks that), and an unknown one is refused naming them all, at its line.
func TestBackendNamesFromOption(t *testing.T) {
	names := []string{"auto", "nvml", "drm", "sim", "npu-smi"}
	for _, name := range names {
		p, err := Parse([]byte("[watch]\nbackend = \""+name+"\"\n"), "p.toml", Backends(names...))
		if err != nil || p.Watch.Backend != name {
			t.Errorf("backend %q: %v", name, err)
		}
	}
	_, err := Parse([]byte("[watch]\nbackend = \"cuda\"\n"), "p.toml", Backends(names...))
	if err == nil {
		t.Fatal("backend cuda accepted")
	}
	if want := `p.toml:2: watch.backend: must be one of "auto", "nvml", "drm", "sim", "npu-smi", got "cuda"`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestBackendsWithoutOption: a caller that passes no names gets only the
// default, so that a forgotten option fails loudly, not at open.
func TestBackendsWithoutOption(t *testing.T) {
	if p, err := Parse([]byte("[watch]\nbackend = \"auto\"\n"), "p.toml"); err != nil || p.Watch.Backend != "auto" {
		t.Errorf("auto without the option: %v", err)
	}
	_, err := Parse([]byte("[watch]\nbackend = \"sim\"\n"), "p.toml")
	if err == nil || !strings.Contains(err.Error(), `must be one of "auto", got "sim"`) {
		t.Errorf("sim without the option: %v", err)
	}
}

// contractBackends is the option cmd passes (open.Names), spelt out for
// the tests that parse a policy naming a backend.
func contractBackends() Option { return Backends("auto", "nvml", "drm", "sim", "npu-smi") }
