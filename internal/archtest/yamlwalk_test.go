package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// walkedDirs parse YAML with internal/yamlwalk: a mapping is walked one way
// (keys in order, paths, aliases, unknown and repeated keys at their lines),
// never by stepping over a node's Content two at a time.
var walkedDirs = []string{"schemas", "collector"}

// handWalks lists, as "file:line", every loop in the non-test files under dirs
// that steps through a yaml.Node's Content by two: a mapping walked by hand.
func handWalks(root string, dirs []string) ([]string, error) {
	var out []string
	err := eachGoFile(root, dirs, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if loop, ok := n.(*ast.ForStmt); ok && stepsByTwo(loop.Post) && mentionsContent(loop.Cond) {
				out = append(out, fmt.Sprintf("%s:%d", rel, fset.Position(loop.Pos()).Line))
			}
			return true
		})
	})
	return out, err
}

func stepsByTwo(post ast.Stmt) bool {
	a, ok := post.(*ast.AssignStmt)
	if !ok || a.Tok != token.ADD_ASSIGN || len(a.Rhs) != 1 {
		return false
	}
	lit, ok := a.Rhs[0].(*ast.BasicLit)
	return ok && lit.Value == "2"
}

func mentionsContent(e ast.Expr) bool {
	found := false
	if e != nil {
		ast.Inspect(e, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "Content" {
				found = true
			}
			return !found
		})
	}
	return found
}

// The check finds a planted hand walk and passes other loops and test files.
func TestHandWalksFindsAHandWalk(t *testing.T) {
	got := planted(t, `package x

import "gopkg.in/yaml.v3"

func keys(n *yaml.Node) (out []string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, n.Content[i].Value)
	}
	for i := 0; i < len(out); i += 2 {
	}
	for _, c := range n.Content {
		_ = c
	}
	return out
}
`, handWalks)
	if strings.Join(got, ",") != "p/x.go:6" {
		t.Fatalf("hand walks: %q", got)
	}
}
