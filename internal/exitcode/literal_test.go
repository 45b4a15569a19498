package exitcode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// spelledElsewhere are the files still allowed to spell 128+signal:
// none now (the decision core calls Signaled too). A file named here is a
// known exception, to be folded in.
var spelledElsewhere = map[string]bool{}

// TestSignaledIsTheOnlySpelling: no non-test file outside this package
// spells 128+signal; they call Signaled, so a child's status by signal
// has one definition. (cmd's TestNoLiteralExitCodes covers the named
// codes there.) A 128 added to something without "sig" in its name (a
// PCI function number) is not an exit status and passes.
func TestSignaledIsTheOnlySpelling(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "internal/exitcode" || rel == "e2e" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || spelledElsewhere[rel] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD && (is128(b.X) && mentionsSig(b.Y) || is128(b.Y) && mentionsSig(b.X)) {
				t.Errorf("%s: 128+signal spelled out; call exitcode.Signaled", fset.Position(b.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func is128(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Kind == token.INT && l.Value == "128"
}

// mentionsSig says whether e names something with "sig" in it (sig,
// e.Signal, syscall.SIGTERM).
func mentionsSig(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.Contains(strings.ToLower(id.Name), "sig") {
			found = true
		}
		return !found
	})
	return found
}
