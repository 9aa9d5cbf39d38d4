package ledgertest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/internal/ledger"
)

func testRoster(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	st := func(p, u, name, email string) ledger.Student {
		return ledger.Student{Project: p, User: u, Name: name, Email: email}
	}
	ch := get(s.ImportRoster(ctx, "lead:nlp", ledger.RosterImport{Mode: ledger.RosterReplace, Projects: []string{"nlp", "cv"},
		Students: []ledger.Student{st("nlp", "s1", "张三", "s1@example.edu"), st("nlp", "s2", "Li Si", ""), st("cv", "s1", "张三", "")}}))(t)
	if ch != (ledger.RosterChange{Added: 3}) {
		t.Fatalf("first import: %+v", ch)
	}
	// The same student ID in two projects (courses) is two rows.
	got, _ := get2(s.Students(ctx, ledger.StudentFilter{User: "s1"}))(t)
	if len(got) != 2 {
		t.Fatalf("s1 in %d projects, want 2: %+v", len(got), got)
	}
	// Replace: s2 goes, s3 comes, s1 changes; cv is not in the import and stays.
	ch = get(s.ImportRoster(ctx, "lead:nlp", ledger.RosterImport{Mode: ledger.RosterReplace, Projects: []string{"nlp"},
		Students: []ledger.Student{st("nlp", "s1", "张三", "zs@example.edu"), st("nlp", "s3", "Wang", "")}}))(t)
	if ch != (ledger.RosterChange{Added: 1, Updated: 1, Removed: 1}) {
		t.Fatalf("replace: %+v", ch)
	}
	// Merge: adds and updates, removes nothing; unchanged rows are counted.
	ch = get(s.ImportRoster(ctx, "lead:nlp", ledger.RosterImport{Mode: ledger.RosterMerge, Projects: []string{"nlp"},
		Students: []ledger.Student{st("nlp", "s1", "张三", "zs@example.edu"), st("nlp", "s4", "Zhao", "")}}))(t)
	if ch != (ledger.RosterChange{Added: 1, Unchanged: 1}) {
		t.Fatalf("merge: %+v", ch)
	}
	nlp, _ := get2(s.Students(ctx, ledger.StudentFilter{Project: "nlp"}))(t)
	var users []string
	for _, x := range nlp {
		users = append(users, x.User+"="+x.Name+"/"+x.Email)
	}
	if strings.Join(users, " ") != "s4=Zhao/ s3=Wang/ s1=张三/zs@example.edu" {
		t.Fatalf("nlp roster: %v", users)
	}
	// Pagination by cursor.
	p1, next := get2(s.Students(ctx, ledger.StudentFilter{Limit: 2}))(t)
	p2, last := get2(s.Students(ctx, ledger.StudentFilter{Limit: 2, Cursor: next}))(t)
	if len(p1) != 2 || next == "" || len(p2) != 2 || last != "" {
		t.Fatalf("pages: %d %q %d %q", len(p1), next, len(p2), last)
	}
	// Audited with before and after, per project.
	es, _ := get2(s.Audit(ctx, ledger.AuditFilter{Object: "roster/nlp"}))(t)
	if len(es) != 3 || es[0].Action != "roster.import.merge" || string(es[2].Before) != "[]" {
		t.Fatalf("audit of roster/nlp: %+v", es)
	}
	var before, after []map[string]string
	if err := json.Unmarshal(es[1].Before, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(es[1].After, &after); err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || before[1]["user"] != "s2" || len(after) != 2 || after[1]["user"] != "s3" {
		t.Fatalf("replace audit before %v after %v", before, after)
	}
	// A repeated import changes nothing and writes no audit entry.
	ch = get(s.ImportRoster(ctx, "lead:nlp", ledger.RosterImport{Mode: ledger.RosterMerge, Projects: []string{"nlp"},
		Students: []ledger.Student{st("nlp", "s4", "Zhao", "")}}))(t)
	if ch != (ledger.RosterChange{Unchanged: 1}) {
		t.Fatalf("repeat: %+v", ch)
	}
	if es2, _ := get2(s.Audit(ctx, ledger.AuditFilter{Object: "roster/nlp"}))(t); len(es2) != 3 {
		t.Fatalf("a no-op import was audited: %d entries", len(es2))
	}
}

func testRosterValidation(t *testing.T, open Opener) {
	s := open(t, NewClock(t0).Now)
	ctx := ctxT(t)
	_, err := s.ImportRoster(ctx, "lead", ledger.RosterImport{Mode: "upsert", Projects: []string{"nlp"}, Students: []ledger.Student{
		{Project: "nlp", User: ""}, {Project: "cv", User: "s1"}, {Project: "nlp", User: "s2", Email: "not-an-address"},
		{Project: "nlp", User: "s3"}, {Project: "nlp", User: "s3"}}})
	wantErr(t, err, ledger.ErrInvalidArgument, "bad import")
	for _, want := range []string{`mode "upsert"`, "student 1: user is required", `student 2 (s1): project "cv"`,
		`student 3 (s2): email "not-an-address"`, "student 5: nlp/s3 repeats student 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Nothing was stored (all or nothing).
	if got, _ := get2(s.Students(ctx, ledger.StudentFilter{}))(t); len(got) != 0 {
		t.Fatalf("a refused import stored %d students", len(got))
	}
}

func testBillingRuns(t *testing.T, open Opener) {
	s := open(t, NewClock(t0).Now)
	ctx := ctxT(t)
	cat := catalog(t, s)
	r1 := get(s.SaveBillingRun(ctx, "finance", ledger.BillingRun{Period: "2026-11", CatalogVersion: cat, DataCutoff: t0,
		Report: []byte(`{"drafts":[1]}`)}))(t)
	r2 := get(s.SaveBillingRun(ctx, "finance", ledger.BillingRun{Period: "2026-12", CatalogVersion: cat, DataCutoff: t0,
		Report: []byte(`{"drafts":[]}`)}))(t)
	if r1.ID == 0 || r2.ID <= r1.ID || r1.Actor != "finance" || !r1.CreatedAt.Equal(t0) {
		t.Fatalf("runs: %+v %+v", r1, r2)
	}
	got := get(s.BillingRun(ctx, r1.ID))(t)
	if string(got.Report) != `{"drafts":[1]}` || !got.DataCutoff.Equal(t0) || got.CatalogVersion != cat {
		t.Fatalf("run read back: %+v", got)
	}
	list, _ := get2(s.BillingRuns(ctx, ledger.BillingRunFilter{Period: "2026-11"}))(t)
	if len(list) != 1 || list[0].ID != r1.ID || list[0].Report != nil {
		t.Fatalf("list: %+v", list)
	}
	_, err := s.BillingRun(ctx, 999)
	wantErr(t, err, ledger.ErrNotFound, "missing run")
	_, err = s.SaveBillingRun(ctx, "finance", ledger.BillingRun{Period: "2026-13", Report: []byte("{")})
	wantErr(t, err, ledger.ErrInvalidArgument, "bad run")
	_, err = s.SaveBillingRun(ctx, "finance", ledger.BillingRun{Period: "2026-11", CatalogVersion: 42, DataCutoff: t0, Report: []byte("{}")})
	wantErr(t, err, ledger.ErrInvalidArgument, "run of an unknown catalog version")
}

func testExportRuns(t *testing.T, open Opener) {
	clock := NewClock(t0)
	s := open(t, clock.Now)
	ctx := ctxT(t)
	k := ledger.ExportKey{Period: "2026-11", Target: "webhook"}
	r, started := get2(s.BeginExport(ctx, "export-job", k))(t)
	if !started || r.Status != ledger.ExportPending || r.Attempts != 1 {
		t.Fatalf("first begin: %+v %v", r, started)
	}
	r = get(s.FinishExport(ctx, "export-job", r.ID, nil, "POST: 503 Service Unavailable"))(t)
	if r.Status != ledger.ExportFailed || r.LastError == "" {
		t.Fatalf("failed: %+v", r)
	}
	r, started = get2(s.BeginExport(ctx, "export-job", k))(t)
	if !started || r.Attempts != 2 || r.Status != ledger.ExportPending {
		t.Fatalf("retry: %+v %v", r, started)
	}
	files := []ledger.ExportFile{{Name: "2026-11.csv", SHA256: "ab", Bytes: 10}}
	r = get(s.FinishExport(ctx, "export-job", r.ID, files, ""))(t)
	if r.Status != ledger.ExportDone || r.DoneAt.IsZero() || r.LastError != "" {
		t.Fatalf("done: %+v", r)
	}
	// Done is done: never begun again, never changed.
	again, started := get2(s.BeginExport(ctx, "export-job", k))(t)
	if started || again.Status != ledger.ExportDone || again.Attempts != 2 || len(again.Files) != 1 || again.Files[0] != files[0] {
		t.Fatalf("begin after done: %+v %v", again, started)
	}
	_, err := s.FinishExport(ctx, "export-job", r.ID, nil, "late failure")
	wantErr(t, err, ledger.ErrInvalidTransition, "finish a done run")
	// Another target of the same period is its own run.
	_, started = get2(s.BeginExport(ctx, "export-job", ledger.ExportKey{Period: "2026-11", Target: "dir"}))(t)
	if !started {
		t.Fatal("another target did not start")
	}
	list, _ := get2(s.ExportRuns(ctx, ledger.ExportRunFilter{Period: "2026-11", Status: ledger.ExportDone}))(t)
	if len(list) != 1 || list[0].Target != "webhook" {
		t.Fatalf("done runs: %+v", list)
	}
	_, _, err = s.BeginExport(ctx, "export-job", ledger.ExportKey{Period: "Nov", Target: ""})
	wantErr(t, err, ledger.ErrInvalidArgument, "bad key")
	_, err = s.FinishExport(ctx, "export-job", 999, nil, "")
	wantErr(t, err, ledger.ErrNotFound, "missing run")
	if acts := actions(t, s, ledger.AuditFilter{Object: "export/" + itoa(r.ID)}); strings.Join(acts, ",") !=
		"export.begin export/1,export.fail export/1,export.retry export/1,export.done export/1" {
		t.Fatalf("audit: %v", acts)
	}
}

func itoa(n int64) string { return jsonNum(n) }

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Two replicas beginning the same export at once: the outbox row is made
// once; after one finishes it, neither starts again.
func testConcurrentExportBegin(t *testing.T, open Opener) {
	s1, s2, ctx := replicas(t, open)
	stores := []ledger.Store{s1, s2}
	k := ledger.ExportKey{Period: "2026-11", Target: "dir"}
	runs := make([]ledger.ExportRun, 8)
	errs := make([]error, 8)
	atOnce(len(runs), func(i int) {
		runs[i], _, errs[i] = stores[i%2].BeginExport(ctx, "replica", k)
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		if runs[i].ID != runs[0].ID {
			t.Fatalf("begin %d made run %d, begin 0 run %d", i, runs[i].ID, runs[0].ID)
		}
	}
	list, _ := get2(stores[0].ExportRuns(ctx, ledger.ExportRunFilter{}))(t)
	if len(list) != 1 || list[0].Attempts != 8 {
		t.Fatalf("runs: %+v", list)
	}
}
