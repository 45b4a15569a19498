package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// mayImport is every package the core's code may import: values and pure
// functions of the standard library, the journal's and the tenants' words
// (api), the policy it decides by, and one leaf of constants (a child's
// status by signal has one definition). Nothing that reaches a file, a
// process, a socket, a goroutine or the GPU: the core does no I/O and
// stays a table-tested transition.
var mayImport = map[string]bool{
	"errors":  true,
	"fmt":     true,
	"slices":  true,
	"strings": true,
	"syscall": true, // signal numbers only
	"time":    true, // times and durations; never the clock (readsNoClock)

	"github.com/gpuguard/gpuguard/api":               true,
	"github.com/gpuguard/gpuguard/policy":            true,
	"github.com/gpuguard/gpuguard/internal/exitcode": true,
	"github.com/gpuguard/gpuguard/internal/room":     true, // the ranking of who sleeps to make room (pure)
}

// clock is what of package time reads the clock or waits on it.
var clock = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true}

// TestImportsArePure: the core's code imports only mayImport, and reads
// no clock: time comes in with each input.
func TestImportsArePure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !mayImport[path] {
				t.Errorf("%s imports %s: the core imports only what mayImport names", f, path)
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "time" && clock[sel.Sel.Name] {
					t.Errorf("%s: time.%s reads the clock; the core takes time from its inputs", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
