package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// pureDirs hold the engine and what is computed purely from it: the same
// input gives the same output, whenever and however often it is computed.
// The concurrency and the clock are their callers' (internal/advicerun,
// internal/reads, internal/invoicing).
var pureDirs = []string{"billing"}

// clockReads are the time functions that read the clock or wait on it.
var clockReads = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTicker": true, "NewTimer": true}

// impure lists, as "file:line what", every go statement, clock read and use of
// a goroutine group (sync.WaitGroup, errgroup) in the non-test files under
// dirs. A mutex guarding a cache is allowed: it starts nothing.
func impure(root string, dirs []string) ([]string, error) {
	var out []string
	err := eachGoFile(root, dirs, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, w := range impureIn(f) {
			out = append(out, fmt.Sprintf("%s:%d %s", rel, fset.Position(w.pos).Line, w.what))
		}
	})
	return out, err
}

type finding struct {
	pos  token.Pos
	what string
}

// impureIn finds them in one file; the packages are known by the names the
// file imports them under.
func impureIn(f *ast.File) []finding {
	names := map[string]string{} // local name → import path
	var out []finding
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = path
		if path == "golang.org/x/sync/errgroup" {
			out = append(out, finding{imp.Pos(), "imports errgroup"})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, finding{n.Pos(), "go statement"})
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch names[x.Name] {
			case "time":
				if clockReads[n.Sel.Name] {
					out = append(out, finding{n.Pos(), "reads the clock (time." + n.Sel.Name + ")"})
				}
			case "sync":
				if n.Sel.Name == "WaitGroup" {
					out = append(out, finding{n.Pos(), "waits on goroutines (sync.WaitGroup)"})
				}
			}
		}
		return true
	})
	return out
}

// The check finds a planted go statement, clock reads (under another import
// name too) and a wait group, and passes a mutex, time.Date and test files.
func TestImpureFindsGoroutinesAndClocks(t *testing.T) {
	got := planted(t, `package x

import (
	"sync"
	tm "time"
)

var mu sync.Mutex

func f() tm.Time {
	var wg sync.WaitGroup
	go func() {}()
	_ = tm.Since(tm.Date(2026, 1, 1, 0, 0, 0, 0, tm.UTC))
	wg.Wait()
	return tm.Now()
}
`, impure)
	want := []string{
		"p/x.go:11 waits on goroutines (sync.WaitGroup)",
		"p/x.go:12 go statement",
		"p/x.go:13 reads the clock (time.Since)",
		"p/x.go:15 reads the clock (time.Now)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
