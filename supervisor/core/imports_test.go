package core

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsArePure: the core's code imports policy, api, trend and the
// standard library only, so that it can do no I/O of gpuguard's (no
// probe, no process, no file of its own) and stays a table-tested
// transition.
func TestImportsArePure(t *testing.T) {
	allowed := map[string]bool{
		"github.com/gpuguard/gpuguard/policy":         true,
		"github.com/gpuguard/gpuguard/api":            true,
		"github.com/gpuguard/gpuguard/internal/trend": true,
		// A leaf of constants and one function: a child's status by
		// signal has one definition.
		"github.com/gpuguard/gpuguard/internal/exitcode": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, ".") && !allowed[path] {
				t.Errorf("%s imports %s: the core imports only policy, api, trend, internal/exitcode and the standard library", f, path)
			}
		}
	}
}
