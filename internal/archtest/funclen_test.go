package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a non-test function's body may be in the
// packages below: a newcomer reads one on a screen, and a longer one is a
// sequence of steps that each deserve a name.
const maxFuncLines = 80

var shortFuncDirs = []string{"schemas", "billing", "ingest", "collector", "api", "internal/ledger", "internal/watch", "internal/invoicing", "internal/reads"}

// longFuncs lists every non-test function (or function literal) under dirs
// whose body is longer than max lines, as "file:line name (n lines)".
func longFuncs(root string, dirs []string, max int) ([]string, error) {
	var out []string
	err := eachGoFile(root, dirs, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				name, body = fn.Name.Name, fn.Body
			case *ast.FuncLit:
				name, body = "func literal", fn.Body
			default:
				return true
			}
			if body == nil {
				return true
			}
			if l := fset.Position(body.Rbrace).Line - fset.Position(body.Lbrace).Line - 1; l > max {
				out = append(out, fmt.Sprintf("%s:%d %s (%d lines)", rel, fset.Position(n.Pos()).Line, name, l))
			}
			return true
		})
	})
	return out, err
}

func TestNoLongFunctions(t *testing.T) {
	long, err := longFuncs("../..", shortFuncDirs, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Errorf("%s: split it (at most %d lines a function in %v)", l, maxFuncLines, shortFuncDirs)
	}
}

// The check finds a long function and passes a short one.
func TestLongFuncsFindsALongFunction(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("package x\n\nfunc short() {\n\t_ = 1\n}\n\nfunc long() {\n")
	for range maxFuncLines + 1 {
		b.WriteString("\t_ = 1\n")
	}
	b.WriteString("}\n")
	if err := writeFile(filepath.Join(dir, "p", "x.go"), b.String()); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "p", "x_test.go"), strings.Replace(b.String(), "func long", "func longTest", 1)); err != nil {
		t.Fatal(err)
	}
	got, err := longFuncs(dir, []string{"p"}, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "p/x.go:7 long (81 lines)") {
		t.Fatalf("long functions: %q", got)
	}
}

func writeFile(p, s string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(s), 0o644)
}
