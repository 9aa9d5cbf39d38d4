package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// walkedDirs parse YAML with internal/yamlwalk: a mapping is walked one way
// (keys in order, paths, aliases, unknown and repeated keys at their lines),
// never by stepping over a node's Content two at a time. That is the whole
// module but yamlWalker, whose Pairs is the one such loop.
var walkedDirs = []string{"."}

const yamlWalker = "internal/yamlwalk"

// handWalks lists, as "file:line", every loop in the non-test files under dirs
// (yamlWalker's aside) that steps through a yaml.Node's Content by two: a
// mapping walked by hand.
func handWalks(root string, dirs []string) ([]string, error) {
	var out []string
	err := eachGoFile(root, dirs, func(rel string, fset *token.FileSet, f *ast.File) {
		if filepath.ToSlash(filepath.Dir(rel)) == yamlWalker {
			return
		}
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

// The walker itself is exempt, and it alone: a hand walk beside it or in a
// folder below it is found.
func TestHandWalksExemptsTheWalkerAlone(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nimport \"gopkg.in/yaml.v3\"\n\nfunc keys(n *yaml.Node) {\n\tfor i := 0; i+1 < len(n.Content); i += 2 {\n\t}\n}\n"
	for _, p := range []string{yamlWalker + "/w.go", yamlWalker + "/sub/w.go", "internal/yamlwalker/w.go"} {
		if err := writeFile(filepath.Join(dir, p), src); err != nil {
			t.Fatal(err)
		}
	}
	got, err := handWalks(dir, walkedDirs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "internal/yamlwalk/sub/w.go:6,internal/yamlwalker/w.go:6"; strings.Join(got, ",") != want {
		t.Fatalf("hand walks: %q, want %s", got, want)
	}
}
