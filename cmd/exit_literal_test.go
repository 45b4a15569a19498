package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoLiteralExitCodes: every exit code cmd returns is a named one
// (exit.go, internal/exitcode): no ExitError{Code: 75}, exitf(64, ...) or
// withCode(78, ...) with a bare number, and no 128+s spelled out.
func TestNoLiteralExitCodes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" && hasNumber(n.Value) {
					t.Errorf("%s: an exit code spelled as a number", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				if fn, ok := n.Fun.(*ast.Ident); ok && (fn.Name == "exitf" || fn.Name == "withCode") && len(n.Args) > 0 && hasNumber(n.Args[0]) {
					t.Errorf("%s: %s with an exit code spelled as a number", fset.Position(n.Pos()), fn.Name)
				}
			}
			return true
		})
	}
}

// hasNumber says whether e has an integer literal in it (75, 128+s).
func hasNumber(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.INT {
			found = true
		}
		return !found
	})
	return found
}
