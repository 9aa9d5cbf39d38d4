package invoicing

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cardhour/cardhour/internal/ledger"
)

// RosterResult counts what a roster import changed.
type RosterResult struct {
	Rows      int      `json:"rows"`     // student rows read
	Projects  []string `json:"projects"` // the projects imported
	Added     int      `json:"added"`
	Updated   int      `json:"updated"`
	Removed   int      `json:"removed"`
	Unchanged int      `json:"unchanged"`
}

// RosterProblem is one thing wrong with a roster file.
type RosterProblem struct {
	Line    int    `json:"line"`  // 1-based line of the file; 0: the file as a whole
	Field   string `json:"field"` // the column, by its English name
	Message string `json:"message"`
}

// RosterError lists every problem of a refused roster file; nothing of it
// was imported. It wraps ledger.ErrInvalidArgument.
type RosterError struct {
	Problems []RosterProblem
}

// Error lists the problems, each with its line and field.
func (e *RosterError) Error() string {
	var b strings.Builder
	b.WriteString("roster: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		if p.Line > 0 {
			fmt.Fprintf(&b, "line %d: ", p.Line)
		}
		fmt.Fprintf(&b, "%s: %s", p.Field, p.Message)
	}
	return b.String()
}

// Unwrap makes a RosterError a ledger.ErrInvalidArgument.
func (e *RosterError) Unwrap() error { return ledger.ErrInvalidArgument }

// The roster columns, by English and zh-CN header name.
var rosterColumns = map[string]string{
	"student_id": "student_id", "学号": "student_id",
	"name": "name", "姓名": "name",
	"project": "project", "项目": "project",
	"email": "email", "邮箱": "email",
	"im": "im", "IM": "im",
}

// maxRosterProblems caps the problems reported of one file.
const maxRosterProblems = 100

// ImportRoster imports a roster CSV (header student_id,name,project,email,im
// or 学号,姓名,项目,邮箱,IM, any order; UTF-8 with or without a BOM) in
// replace mode: the file is the whole roster of each project it names.
// With project set the file is that project's roster: its rows must be of
// that project (the project column may then be left out). All or nothing:
// any problem refuses the whole file with a *RosterError naming every
// line and field.
func (s *Service) ImportRoster(ctx context.Context, actor string, r io.Reader, project string) (RosterResult, error) {
	return s.ImportRosterMode(ctx, actor, r, project, ledger.RosterReplace)
}

// ImportRosterMode is ImportRoster in the mode given (replace or merge).
func (s *Service) ImportRosterMode(ctx context.Context, actor string, r io.Reader, project string, mode ledger.RosterMode) (RosterResult, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return RosterResult{}, err
	}
	if mode != ledger.RosterReplace && mode != ledger.RosterMerge {
		return RosterResult{}, fmt.Errorf("%w: roster mode %q: want replace or merge", ledger.ErrInvalidArgument, mode)
	}
	_, cat, err := s.currentCatalog(ctx)
	if err != nil {
		return RosterResult{}, err
	}
	if project != "" {
		if _, ok := cat.Project(project); !ok {
			return RosterResult{}, &RosterError{[]RosterProblem{{Field: "project", Message: fmt.Sprintf("project %q is not in the current catalog", project)}}}
		}
	}
	students, errs := parseRoster(r, project, func(p string) bool { _, ok := cat.Project(p); return ok })
	if len(errs) > 0 {
		return RosterResult{}, &RosterError{errs}
	}
	projects := []string{}
	if project != "" {
		projects = append(projects, project)
	}
	for _, st := range students {
		projects = append(projects, st.Project)
	}
	slices.Sort(projects)
	projects = slices.Compact(projects)
	if len(projects) == 0 {
		return RosterResult{}, &RosterError{[]RosterProblem{{Field: "project", Message: "the file has no rows and no project was given: nothing to import"}}}
	}
	ch, err := s.cfg.Ledger.ImportRoster(ctx, actor, ledger.RosterImport{Mode: mode, Projects: projects, Students: students})
	if err != nil {
		return RosterResult{}, err
	}
	return RosterResult{Rows: len(students), Projects: projects, Added: ch.Added, Updated: ch.Updated, Removed: ch.Removed, Unchanged: ch.Unchanged}, nil
}

// parseRoster reads the CSV; known says whether a project is in the catalog.
func parseRoster(r io.Reader, only string, known func(string) bool) ([]ledger.Student, []RosterProblem) {
	rr := &rosterReader{only: only, known: known}
	if !rr.open(r) || !rr.header() {
		return nil, rr.probs
	}
	out, ok := rr.rows()
	if !ok {
		return nil, rr.probs
	}
	return out, rr.probs
}

// rosterReader reads one roster file, collecting its problems (the first
// maxRosterProblems).
type rosterReader struct {
	only  string            // the project the import is restricted to ("": none)
	known func(string) bool // whether a project is in the catalog
	cr    *csv.Reader
	width int            // the header's number of columns
	col   map[string]int // column name → 1-based index; 0 is absent
	probs []RosterProblem
}

func (rr *rosterReader) add(line int, field, format string, args ...any) {
	if len(rr.probs) < maxRosterProblems {
		rr.probs = append(rr.probs, RosterProblem{Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
	}
}

// open reads the file (at most 32 MiB, a UTF-8 BOM dropped) into a CSV reader.
func (rr *rosterReader) open(r io.Reader) bool {
	data, err := io.ReadAll(io.LimitReader(r, 32<<20+1))
	if err != nil {
		rr.add(0, "file", "cannot read: %v", err)
		return false
	}
	if len(data) > 32<<20 {
		rr.add(0, "file", "larger than 32 MiB")
		return false
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	rr.cr = csv.NewReader(bytes.NewReader(data))
	rr.cr.FieldsPerRecord = -1
	return true
}

// header reads the columns, in English or Chinese; student_id is required,
// and project when the import names none.
func (rr *rosterReader) header() bool {
	header, err := rr.cr.Read()
	if errors.Is(err, io.EOF) {
		rr.add(1, "header", "the file is empty: want a header student_id,name,project,email,im (or 学号,姓名,项目,邮箱,IM)")
		return false
	}
	if err != nil {
		rr.add(csvLine(err, 1), "header", "%v", csvCause(err))
		return false
	}
	rr.width = len(header)
	rr.col = map[string]int{}
	for i, h := range header {
		name, ok := rosterColumns[strings.TrimSpace(h)]
		if !ok {
			name, ok = rosterColumns[strings.ToLower(strings.TrimSpace(h))]
		}
		switch {
		case !ok:
			rr.add(1, "header", "column %d %q: want one of student_id, name, project, email, im (or 学号, 姓名, 项目, 邮箱, IM)", i+1, h)
		case rr.col[name] != 0:
			rr.add(1, "header", "column %d %q repeats column %q", i+1, h, name)
		default:
			rr.col[name] = i + 1
		}
	}
	if rr.col["student_id"] == 0 {
		rr.add(1, "header", "the student_id (学号) column is required")
	}
	if rr.col["project"] == 0 && rr.only == "" {
		rr.add(1, "header", "the project (项目) column is required when no project is given")
	}
	return len(rr.probs) == 0
}

// rows reads the students, skipping blank rows; a CSV error the reader
// cannot resynchronise after stops it (false).
func (rr *rosterReader) rows() ([]ledger.Student, bool) {
	var out []ledger.Student
	seen := map[[2]string]int{}
	for {
		rec, err := rr.cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := rr.cr.FieldPos(0)
		if err != nil {
			rr.add(csvLine(err, line), "row", "%v", csvCause(err))
			if pe := (*csv.ParseError)(nil); errors.As(err, &pe) && !errors.Is(err, csv.ErrFieldCount) {
				return nil, false // the reader cannot resynchronise
			}
			continue
		}
		if len(rec) != rr.width {
			rr.add(line, "row", "%d fields, the header has %d", len(rec), rr.width)
			continue
		}
		if strings.TrimSpace(strings.Join(rec, "")) == "" {
			continue // a blank row
		}
		st := rr.student(line, rec)
		k := [2]string{st.Project, st.User}
		if first, dup := seen[k]; dup && st.User != "" {
			rr.add(line, "student_id", "%s repeats line %d (project %s)", st.User, first, st.Project)
		} else {
			seen[k] = line
		}
		out = append(out, st)
	}
	return out, true
}

// student is the student of row rec at line, its fields checked.
func (rr *rosterReader) student(line int, rec []string) ledger.Student {
	get := func(name string) string {
		if i := rr.col[name]; i > 0 {
			return strings.TrimSpace(rec[i-1])
		}
		return ""
	}
	st := ledger.Student{User: get("student_id"), Name: get("name"), Project: get("project"), Email: get("email"), IM: get("im")}
	for _, f := range []struct{ name, v string }{{"student_id", st.User}, {"name", st.Name}, {"project", st.Project}, {"email", st.Email}, {"im", st.IM}} {
		if !utf8.ValidString(f.v) {
			rr.add(line, f.name, "not valid UTF-8")
		} else if strings.IndexFunc(f.v, unicode.IsControl) >= 0 {
			rr.add(line, f.name, "contains a control character")
		}
	}
	if st.Project == "" {
		st.Project = rr.only
	}
	switch {
	case st.User == "":
		rr.add(line, "student_id", "empty: every row needs a student ID")
	case len(st.User) > 128:
		rr.add(line, "student_id", "longer than 128 bytes")
	}
	switch {
	case st.Project == "":
		rr.add(line, "project", "empty")
	case rr.only != "" && st.Project != rr.only:
		rr.add(line, "project", "%q: this import is restricted to project %q", st.Project, rr.only)
	case !rr.known(st.Project):
		rr.add(line, "project", "%q is not in the current catalog", st.Project)
	}
	if st.Email != "" {
		if a, err := mail.ParseAddress(st.Email); err != nil || a.Address != st.Email {
			rr.add(line, "email", "%q is not an e-mail address", st.Email)
		}
	}
	return st
}

func csvLine(err error, def int) int {
	var pe *csv.ParseError
	if errors.As(err, &pe) && pe.Line > 0 {
		return pe.Line
	}
	return def
}

func csvCause(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
