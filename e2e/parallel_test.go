package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryTestSaysHowItRuns: each test of the package calls t.Parallel()
// in its own body, or says in its doc comment why it runs alone (a
// paragraph that starts with "Serial:"), as doc.go asks. One serial test
// forgotten costs every run of the suite its whole duration.
func TestEveryTestSaysHowItRuns(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			n++
			parallel, serial := callsParallel(fn), saysSerial(fn.Doc)
			switch {
			case parallel && serial:
				t.Errorf("%s: %s calls t.Parallel() and says Serial: in its doc comment; choose one", fset.Position(fn.Pos()), fn.Name.Name)
			case !parallel && !serial:
				t.Errorf("%s: %s neither calls t.Parallel() nor says why it runs alone (a \"Serial: why\" paragraph in its doc comment); see doc.go",
					fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	if n < 50 {
		t.Fatalf("found %d tests in %d files: is the test reading the package's own dir?", n, len(files))
	}
}

// callsParallel reports whether the function's own body (not a closure or
// a subtest in it) calls X.Parallel().
func callsParallel(fn *ast.FuncDecl) bool {
	for _, st := range fn.Body.List {
		if isParallelCall(st) {
			return true
		}
	}
	return false
}

func isParallelCall(st ast.Stmt) bool {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Parallel"
}

// saysSerial reports whether a doc comment has a paragraph that starts
// with "Serial:".
func saysSerial(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, para := range strings.Split(doc.Text(), "\n\n") {
		if strings.HasPrefix(strings.TrimSpace(para), "Serial:") {
			return true
		}
	}
	return false
}
