package policy

import (
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/backends"
)

// TestBackendNamesFromTable: [watch] backend takes exactly the names of
// the backend table, the list cmd's --backend takes, and an unknown one is
// refused naming them all.
func TestBackendNamesFromTable(t *testing.T) {
	for _, name := range backends.Names() {
		p, err := Parse([]byte("[watch]\nbackend = \""+name+"\"\n"), "p.toml")
		if err != nil || p.Watch.Backend != name {
			t.Errorf("backend %q: %v", name, err)
		}
	}
	_, err := Parse([]byte("[watch]\nbackend = \"cuda\"\n"), "p.toml")
	if err == nil {
		t.Fatal("backend cuda accepted")
	}
	for _, name := range backends.Names() {
		if !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("error %q does not name %q", err, name)
		}
	}
}
