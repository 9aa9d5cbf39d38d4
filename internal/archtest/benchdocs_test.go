package archtest

import (
	"bufio"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The commands of docs/benchmarks.md are what a reader copies to reproduce a
// figure, so each must run as written. TestBenchmarkDocsCommands reads every
// sh block and checks, for each simple command in it:
//   - `go test … -bench P ./pkg`, and a test binary built with `go test -c -o X
//     ./pkg` then run with `-test.bench P`: the package exists and P selects
//     at least one benchmark in it; a CARDHOUR_* variable set before it is
//     read by that package;
//   - `go build -o X ./dir` and `go run ./dir`: dir is a main package here;
//   - a script (`scripts/…`): it exists and is executable;
//   - the cardhour binary (`cardhour`, `bin/cardhour`, or a path built from
//     ./cmd/cardhour above it) and the Go tools under scripts/ (run directly
//     or through the path they were built to): the command line is run, as
//     written, with -h appended, so that the flag parser reads every flag and
//     value first and stops before doing anything (a value holding a shell
//     expansion may fail to parse; nothing else may).
//
// A command that needs a service, a filled store or an hour is not run
// further: what it reads from the tree (packages, benchmarks, scripts, flags,
// variables) is what this checks.
func TestBenchmarkDocsCommands(t *testing.T) {
	root := repoRoot(t)
	cmds, err := benchDocCommands(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 40 {
		t.Fatalf("read only %d commands from docs/benchmarks.md: the reader is broken", len(cmds))
	}
	c := &docChecker{t: t, root: root, bins: map[string]string{}, built: map[string]string{}, benches: map[string][]string{}}
	for _, cmd := range cmds {
		c.check(cmd)
	}
	if c.checked < 40 {
		t.Errorf("checked only %d commands", c.checked)
	}
	t.Logf("checked %d of the %d commands of docs/benchmarks.md", c.checked, len(cmds))
}

// docCommand is one simple command: its environment assignments, its words,
// and the line of docs/benchmarks.md it starts on.
type docCommand struct {
	line  int
	env   []string
	words []string
}

func (d docCommand) String() string {
	return fmt.Sprintf("docs/benchmarks.md:%d: %s", d.line, strings.Join(append(append([]string{}, d.env...), d.words...), " "))
}

var arith = regexp.MustCompile(`\$\(\([^)]*\)\)`)

// benchDocCommands reads the simple commands of the sh blocks of path.
func benchDocCommands(path string) ([]docCommand, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []docCommand
	sc := bufio.NewScanner(f)
	in, n, start := false, 0, 0
	var joined string
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if joined == "" {
			start = n
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			joined += s + " "
			continue
		}
		joined += line
		out = append(out, splitCommands(start, joined)...)
		joined = ""
	}
	return out, sc.Err()
}

// splitCommands splits a shell line into simple commands: at ; & | && || and
// parentheses, with $(…) read as a command of its own, comments dropped,
// redirections dropped with their targets, and quotes removed.
func splitCommands(line int, s string) []docCommand {
	s = arith.ReplaceAllString(s, "1")
	var out []docCommand
	cur := docCommand{line: line}
	var word strings.Builder
	inWord, redirect := false, false
	flushWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		word.Reset()
		inWord = false
		switch {
		case redirect:
			redirect = false
		case len(cur.words) == 0 && isAssignment(w):
			cur.env = append(cur.env, strings.Trim(w, "[]"))
		default:
			cur.words = append(cur.words, w)
		}
	}
	flush := func() {
		flushWord()
		if len(cur.words) > 0 {
			out = append(out, cur)
		}
		cur = docCommand{line: line}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case ch == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				j = len(s) - i - 1
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case ch == '#' && !inWord:
			i = len(s)
		case ch == '$' && i+1 < len(s) && s[i+1] == '(':
			flush()
			i++
		case ch == ';' || ch == '&' || ch == '|' || ch == '(' || ch == ')':
			flush()
		case ch == '>' || ch == '<':
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset() // a file descriptor: 2>file
				inWord = false
			}
			flushWord()
			redirect = true
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				i++
			}
		case ch == ' ' || ch == '\t':
			flushWord()
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return out
}

var assignment = regexp.MustCompile(`^\[?[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(w string) bool { return assignment.MatchString(w) }

type docChecker struct {
	t       *testing.T
	root    string
	checked int
	bins    map[string]string   // a path a command was built to -> the package directory
	built   map[string]string   // package directory -> the binary built here for -h runs
	benches map[string][]string // package directory -> its benchmark names
}

func (c *docChecker) check(d docCommand) {
	w := d.words
	switch {
	case w[0] == "go" && len(w) > 1 && w[1] == "test":
		c.checked++
		c.goTest(d)
	case w[0] == "go" && len(w) > 2 && (w[1] == "build" || w[1] == "run"):
		c.checked++
		c.goBuildRun(d)
	case strings.HasPrefix(w[0], "scripts/") || strings.HasPrefix(w[0], "./scripts/"):
		c.checked++
		fi, err := os.Stat(filepath.Join(c.root, w[0]))
		if err != nil || fi.Mode()&0o111 == 0 {
			c.t.Errorf("%s: %s is not an executable script here", d, w[0])
		}
	case w[0] == "make" && len(w) > 1:
		c.checked++
		c.makeTargets(d)
	default:
		if dir, ok := c.binary(w[0]); ok {
			c.checked++
			if strings.HasSuffix(dir, ".test") {
				c.testBinary(d, strings.TrimSuffix(dir, ".test"))
				return
			}
			c.runHelp(d, dir, w[1:])
		}
	}
}

// binary says which package directory the program w was built from.
func (c *docChecker) binary(w string) (string, bool) {
	if w == "cardhour" || w == "bin/cardhour" {
		return "cmd/cardhour", true
	}
	dir, ok := c.bins[w]
	return dir, ok
}

func (c *docChecker) goBuildRun(d docCommand) {
	w := d.words
	out, pkg := "", ""
	rest := w[2:]
	for i := 0; i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "-o" && i+1 < len(rest):
			out = rest[i+1]
			i++
		case strings.HasPrefix(a, "./"):
			pkg = filepath.Clean(a)
			rest = rest[i+1:]
			i = len(rest)
		}
	}
	if pkg == "" {
		c.t.Errorf("%s: no package", d)
		return
	}
	if !c.isMain(pkg) {
		c.t.Errorf("%s: %s is not a main package here", d, pkg)
		return
	}
	if w[1] == "build" && out != "" {
		c.bins[out] = pkg
		c.bins["./"+strings.TrimPrefix(out, "./")] = pkg
		return
	}
	if w[1] == "run" {
		c.runHelp(d, pkg, rest)
	}
}

func (c *docChecker) isMain(dir string) bool {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(c.root, dir), func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.PackageClauseOnly)
	return err == nil && pkgs["main"] != nil
}

func (c *docChecker) goTest(d docCommand) {
	w := d.words[2:]
	var bench, out string
	var pkgs []string
	for i := 0; i < len(w); i++ {
		a := w[i]
		switch {
		case (a == "-bench" || a == "-test.bench") && i+1 < len(w):
			bench = w[i+1]
			i++
		case strings.HasPrefix(a, "-bench="):
			bench = strings.TrimPrefix(a, "-bench=")
		case a == "-o" && i+1 < len(w):
			out = w[i+1]
			i++
		case a == "-run" || a == "-count" || a == "-benchtime" || a == "-fuzz" || a == "-fuzztime" || a == "-timeout" || a == "-cpuprofile" || a == "-memprofile":
			i++
		case strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, filepath.Clean(strings.TrimSuffix(a, "/...")))
		}
	}
	if len(pkgs) == 0 {
		c.t.Errorf("%s: no package", d)
		return
	}
	for _, pkg := range pkgs {
		if fi, err := os.Stat(filepath.Join(c.root, pkg)); err != nil || !fi.IsDir() {
			c.t.Errorf("%s: no package %s here", d, pkg)
			continue
		}
		if out != "" {
			c.bins[out] = pkg + ".test"
			c.bins["./"+strings.TrimPrefix(out, "./")] = pkg + ".test"
		}
		if bench != "" {
			c.matchBench(d, pkg, bench)
		}
		c.envRead(d, pkg)
	}
}

func (c *docChecker) testBinary(d docCommand, pkg string) {
	for i, a := range d.words {
		if (a == "-test.bench" || a == "-bench") && i+1 < len(d.words) {
			c.matchBench(d, pkg, d.words[i+1])
		}
	}
}

// matchBench checks that pattern (go test's -bench) selects a benchmark of pkg.
func (c *docChecker) matchBench(d docCommand, pkg, pattern string) {
	top := strings.SplitN(pattern, "/", 2)[0]
	re, err := regexp.Compile(top)
	if err != nil {
		c.t.Errorf("%s: -bench %q: %v", d, pattern, err)
		return
	}
	names, ok := c.benches[pkg]
	if !ok {
		names = benchmarksIn(c.t, filepath.Join(c.root, pkg))
		c.benches[pkg] = names
	}
	for _, n := range names {
		if re.MatchString(n) {
			return
		}
	}
	c.t.Errorf("%s: -bench %q selects no benchmark of ./%s (it has %v)", d, pattern, pkg, names)
}

func benchmarksIn(t *testing.T, dir string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Errorf("parse %s: %v", dir, err)
		return nil
	}
	var names []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Benchmark") {
					names = append(names, fn.Name.Name)
				}
			}
		}
	}
	return names
}

// envRead checks that each CARDHOUR_* variable set for a go test is read by
// the package under test.
func (c *docChecker) envRead(d docCommand, pkg string) {
	for _, e := range d.env {
		name, _, _ := strings.Cut(e, "=")
		if !strings.HasPrefix(name, "CARDHOUR_") {
			continue
		}
		found := false
		files, _ := filepath.Glob(filepath.Join(c.root, pkg, "*.go"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), `"`+name+`"`) {
				found = true
				break
			}
		}
		if !found {
			c.t.Errorf("%s: ./%s does not read %s", d, pkg, name)
		}
	}
}

func (c *docChecker) makeTargets(d docCommand) {
	mk, err := os.ReadFile(filepath.Join(c.root, "Makefile"))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, target := range d.words[1:] {
		if strings.Contains(target, "=") || strings.HasPrefix(target, "-") {
			continue
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `\s*:`).Match(mk) {
			c.t.Errorf("%s: the Makefile has no target %s", d, target)
		}
	}
}

// runHelp runs the program of package dir with args and -h appended.
func (c *docChecker) runHelp(d docCommand, dir string, args []string) {
	bin, ok := c.built[dir]
	if !ok {
		bin = filepath.Join(c.t.TempDir(), filepath.Base(dir))
		cmd := exec.Command("go", "build", "-o", bin, "./"+dir)
		cmd.Dir = c.root
		if out, err := cmd.CombinedOutput(); err != nil {
			c.t.Fatalf("go build ./%s: %v\n%s", dir, err, out)
		}
		c.built[dir] = bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{}, args...), "-h")...)
	cmd.Dir = c.t.TempDir()
	out, err := cmd.CombinedOutput()
	text := string(out)
	for _, bad := range []string{"flag provided but not defined", "unknown command", "unexpected argument"} {
		if strings.Contains(text, bad) {
			c.t.Errorf("%s: %s", d, firstLineWith(text, bad))
		}
	}
	if strings.Contains(text, "invalid value") {
		if l := firstLineWith(text, "invalid value"); !strings.Contains(l, "$") {
			c.t.Errorf("%s: %s", d, l)
		}
	} else if err != nil && ctx.Err() != nil {
		c.t.Errorf("%s: did not stop at -h within 30 s", d)
	}
}

func firstLineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}
