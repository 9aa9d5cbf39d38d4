package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// eachGoFile parses every non-test Go file under dirs of root and hands it to
// fn with its path relative to root: the source checks below read the tree
// this way.
func eachGoFile(root string, dirs []string, fn func(rel string, fset *token.FileSet, f *ast.File)) error {
	fset := token.NewFileSet()
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			fn(rel, fset, f)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// planted runs check over a package holding src twice, as x.go and as
// x_test.go, and returns what it found (in x.go alone, if it skips tests).
func planted(t *testing.T, src string, check func(root string, dirs []string) ([]string, error)) []string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"x.go", "x_test.go"} {
		if err := writeFile(filepath.Join(dir, "p", name), src); err != nil {
			t.Fatal(err)
		}
	}
	got, err := check(dir, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The tree passes the source checks: billing/ starts no goroutine and reads
// no clock (impure); the module walks YAML mappings with internal/yamlwalk
// alone (handWalks).
func TestSourceChecks(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(root string, dirs []string) ([]string, error)
		dirs  []string
		why   string
	}{
		{"BillingIsPure", impure, pureDirs, "billing/ is computed purely from the engine; move it to its caller (e.g. internal/advicerun)"},
		{"YAMLIsWalkedOneWay", handWalks, walkedDirs, "a YAML mapping walked by hand; use internal/yamlwalk.Mapping"},
	} {
		t.Run(c.name, func(t *testing.T) {
			found, err := c.check("../..", c.dirs)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range found {
				t.Errorf("%s: %s", f, c.why)
			}
		})
	}
}
