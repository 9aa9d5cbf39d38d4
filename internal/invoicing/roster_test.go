package invoicing_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

func rosterFixture(t *testing.T) *fixture {
	f := newFixture(t, sqliteLedger(t), nil)
	must[ledger.CatalogVersion](t)(firstOf(f.led.PutCatalog(ctxT(t), "admin", exampleCatalog(t))))
	return f
}

func TestRosterImport(t *testing.T) {
	ctx := ctxT(t)
	f := rosterFixture(t)
	// zh-CN headers, a BOM, columns in any order, CRLF, a blank row.
	file := "\ufeff学号,项目,姓名,邮箱,IM\r\n2023110042,nlp-lab,张三,zs@example.edu,wx:zs\r\n,,,,\r\n2023110043,nlp-lab,李四,,\r\n2023110042,cv-lab,张三,,\r\n"
	res := must[invoicing.RosterResult](t)(f.svc.ImportRoster(ctx, "admin", strings.NewReader(file), ""))
	if res.Rows != 3 || res.Added != 3 || strings.Join(res.Projects, ",") != "cv-lab,nlp-lab" {
		t.Fatalf("first import: %+v", res)
	}
	// English headers, restricted to one project (no project column):
	// replace updates one, removes one, adds one; cv-lab is untouched.
	file = "student_id,name,email\n2023110042,Zhang San,zs@example.edu\n2023110044,Wang Wu,ww@example.edu\n"
	res = must[invoicing.RosterResult](t)(f.svc.ImportRoster(ctx, "lead", strings.NewReader(file), "nlp-lab"))
	if res.Added != 1 || res.Updated != 1 || res.Removed != 1 {
		t.Fatalf("replace: %+v", res)
	}
	cv := must[[]ledger.Student](t)(firstOf(f.led.Students(ctx, ledger.StudentFilter{Project: "cv-lab"})))
	if len(cv) != 1 || cv[0].Name != "张三" {
		t.Fatalf("cv-lab roster: %+v", cv)
	}
	// Merge adds without removing.
	res = must[invoicing.RosterResult](t)(f.svc.ImportRosterMode(ctx, "lead", strings.NewReader("student_id,name\n2023110045,Zhao\n"), "nlp-lab", ledger.RosterMerge))
	if res.Added != 1 || res.Removed != 0 {
		t.Fatalf("merge: %+v", res)
	}
}

func TestRosterErrorsNameLineAndField(t *testing.T) {
	ctx := ctxT(t)
	f := rosterFixture(t)
	cases := []struct {
		name, file, project string
		want                []string
	}{
		{"bad rows", "student_id,name,project,email,im\n" +
			"s1,A,nlp-lab,not-an-email,\n" + // line 2
			",B,nlp-lab,,\n" + // line 3
			"s3,C,no-such-lab,,\n" + // line 4
			"s4,D,,,\n" + // line 5
			"s1,E,nlp-lab,,\n", // line 6
			"", []string{`line 2: email: "not-an-email" is not an e-mail address`, "line 3: student_id: empty",
				`line 4: project: "no-such-lab" is not in the current catalog`, "line 5: project: empty",
				"line 6: student_id: s1 repeats line 2"}},
		{"another project's rows", "student_id,name,project\ns1,A,nlp-lab\ns2,B,cv-lab\n", "nlp-lab",
			[]string{`line 3: project: "cv-lab": this import is restricted to project "nlp-lab"`}},
		{"unknown column", "student_id,phone\n", "nlp-lab", []string{`line 1: header: column 2 "phone"`}},
		{"no id column", "name,project\n", "", []string{"line 1: header: the student_id (学号) column is required"}},
		{"no project column", "student_id,name\ns1,A\n", "", []string{"the project (项目) column is required"}},
		{"field count", "student_id,name,project\ns1,A\n", "", []string{"line 2: row: 2 fields, the header has 3"}},
		{"bad quote", "student_id,name,project\ns1,\"A,nlp-lab\n", "", []string{"line 2: row:"}},
		{"empty file", "", "", []string{"line 1: header: the file is empty"}},
		{"control character", "student_id,name,project\ns1,A\x07,nlp-lab\n", "", []string{"line 2: name: contains a control character"}},
		{"unknown project argument", "student_id\ns1\n", "no-such-lab", []string{`project: project "no-such-lab" is not in the current catalog`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.svc.ImportRoster(ctx, "admin", strings.NewReader(c.file), c.project)
			var re *invoicing.RosterError
			if !errors.As(err, &re) || !errors.Is(err, ledger.ErrInvalidArgument) {
				t.Fatalf("error %v: want a *RosterError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// All or nothing: nothing was stored by any of them.
	if got := must[[]ledger.Student](t)(firstOf(f.led.Students(ctx, ledger.StudentFilter{}))); len(got) != 0 {
		t.Fatalf("refused files stored %d students", len(got))
	}
}
