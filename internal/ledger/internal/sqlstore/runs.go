package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cardhour/cardhour/internal/ledger"
)

// ---------------------------------------------------------------- roster

const studentCols = `id, project, user_name, name, email, im, updated_ms`

func scanStudent(sc rowScanner) (ledger.Student, int64, error) {
	var st ledger.Student
	var id, updated int64
	err := sc.Scan(&id, &st.Project, &st.User, &st.Name, &st.Email, &st.IM, &updated)
	st.UpdatedAt = fromMS(updated)
	return st, id, err
}

// rosterView is a student as the audit log shows it.
type rosterView struct {
	User  string `json:"user"`
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	IM    string `json:"im,omitempty"`
}

func (s *Store) roster(ctx context.Context, q querier, project string) (map[string]ledger.Student, error) {
	rows, err := q.QueryContext(ctx, s.d.Rebind(`SELECT `+studentCols+` FROM ledger_students WHERE project = ?`), project)
	if err != nil {
		return nil, fmt.Errorf("%s ledger: cannot read the roster of %s: %w", s.d.Name, project, err)
	}
	defer rows.Close() //nolint:errcheck // read-only; errors surface on Next/Err
	out := map[string]ledger.Student{}
	for rows.Next() {
		st, _, err := scanStudent(rows)
		if err != nil {
			return nil, fmt.Errorf("%s ledger: cannot read a student of %s: %w", s.d.Name, project, err)
		}
		out[st.User] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s ledger: cannot read the roster of %s: %w", s.d.Name, project, err)
	}
	return out, nil
}

func rosterJSON(m map[string]ledger.Student) json.RawMessage {
	users := make([]string, 0, len(m))
	for u := range m {
		users = append(users, u)
	}
	slices.Sort(users)
	out := make([]rosterView, 0, len(users))
	for _, u := range users {
		st := m[u]
		out = append(out, rosterView{st.User, st.Name, st.Email, st.IM})
	}
	return mustJSON(out)
}

// ImportRoster implements ledger.Store.
func (s *Store) ImportRoster(ctx context.Context, actor string, r ledger.RosterImport) (ledger.RosterChange, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.RosterChange{}, err
	}
	if err := ledger.CheckRosterImport(&r); err != nil {
		return ledger.RosterChange{}, err
	}
	projects := slices.Clone(r.Projects)
	slices.Sort(projects)
	projects = slices.Compact(projects)
	var ch ledger.RosterChange
	err := s.tx(ctx, "roster import", func(tx *sql.Tx) error {
		now := s.now()
		for _, p := range projects {
			if err := s.lock(ctx, tx, "roster/"+p); err != nil {
				return err
			}
			before, err := s.roster(ctx, tx, p)
			if err != nil {
				return err
			}
			after := map[string]ledger.Student{}
			if r.Mode == ledger.RosterMerge {
				for u, st := range before {
					after[u] = st
				}
			}
			for _, st := range r.Students {
				if st.Project != p {
					continue
				}
				old, had := before[st.User]
				switch {
				case !had:
					ch.Added++
					if _, err := s.exec(ctx, tx, `INSERT INTO ledger_students (project, user_name, name, email, im, updated_ms)
						VALUES (?, ?, ?, ?, ?, ?)`, p, st.User, st.Name, st.Email, st.IM, now.UnixMilli()); err != nil {
						return fmt.Errorf("%s ledger: cannot add student %s/%s: %w", s.d.Name, p, st.User, err)
					}
				case old.Name != st.Name || old.Email != st.Email || old.IM != st.IM:
					ch.Updated++
					if _, err := s.exec(ctx, tx, `UPDATE ledger_students SET name = ?, email = ?, im = ?, updated_ms = ?
						WHERE project = ? AND user_name = ?`, st.Name, st.Email, st.IM, now.UnixMilli(), p, st.User); err != nil {
						return fmt.Errorf("%s ledger: cannot update student %s/%s: %w", s.d.Name, p, st.User, err)
					}
				default:
					ch.Unchanged++
				}
				after[st.User] = st
			}
			if r.Mode == ledger.RosterReplace {
				for u := range before {
					if _, keep := after[u]; keep {
						continue
					}
					ch.Removed++
					if _, err := s.exec(ctx, tx, `DELETE FROM ledger_students WHERE project = ? AND user_name = ?`, p, u); err != nil {
						return fmt.Errorf("%s ledger: cannot remove student %s/%s: %w", s.d.Name, p, u, err)
					}
				}
			}
			bj, aj := rosterJSON(before), rosterJSON(after)
			if string(bj) == string(aj) {
				continue
			}
			if _, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "roster.import." + string(r.Mode),
				Object: "roster/" + p, Before: bj, After: aj}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ledger.RosterChange{}, err
	}
	return ch, nil
}

// Students implements ledger.Store.
func (s *Store) Students(ctx context.Context, f ledger.StudentFilter) ([]ledger.Student, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq.eq("project", f.Project)
	pq.eq("user_name", f.User)
	// A student's id is no field of ledger.Student: the page is read with it.
	type row struct {
		ledger.Student
		id int64
	}
	page, next, err := readPage(ctx, s, pq, `SELECT `+studentCols+` FROM ledger_students`, "students",
		func(r *sql.Rows) (row, error) {
			st, id, err := scanStudent(r)
			return row{st, id}, err
		}, func(v *row) int64 { return v.id })
	if err != nil {
		return nil, "", err
	}
	var out []ledger.Student
	for _, r := range page {
		out = append(out, r.Student)
	}
	return out, next, nil
}

// ---------------------------------------------------------------- billing runs

// SaveBillingRun implements ledger.Store.
func (s *Store) SaveBillingRun(ctx context.Context, actor string, r ledger.BillingRun) (ledger.BillingRun, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.BillingRun{}, err
	}
	if err := ledger.CheckBillingRun(&r); err != nil {
		return ledger.BillingRun{}, err
	}
	r.Actor = actor
	r.DataCutoff = fromMS(r.DataCutoff.UnixMilli())
	err := s.tx(ctx, "billing run "+r.Period, func(tx *sql.Tx) error {
		now := s.now()
		r.CreatedAt = fromMS(now.UnixMilli())
		if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_billing_runs (period, actor, catalog_version, data_cutoff_ms, report, created_ms)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING id`), r.Period, actor, r.CatalogVersion, r.DataCutoff.UnixMilli(), string(r.Report),
			now.UnixMilli()).Scan(&r.ID); err != nil {
			if !s.d.IsUnique(err) && strings.Contains(strings.ToLower(err.Error()), "foreign key") {
				return fmt.Errorf("%w: billing run %s: catalog version %d is not stored", ledger.ErrInvalidArgument, r.Period, r.CatalogVersion)
			}
			return fmt.Errorf("%s ledger: cannot record billing run %s: %w", s.d.Name, r.Period, err)
		}
		_, err := s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "billingrun.create",
			Object: "billingrun/" + strconv.FormatInt(r.ID, 10), After: mustJSON(struct {
				Period         string `json:"period"`
				CatalogVersion int64  `json:"catalog_version"`
				ReportSHA256   string `json:"report_sha256"`
			}{r.Period, r.CatalogVersion, ledger.SHA256Hex(r.Report)})})
		return err
	})
	if err != nil {
		return ledger.BillingRun{}, err
	}
	return r, nil
}

const billingRunCols = `id, period, actor, catalog_version, data_cutoff_ms, created_ms`

func scanBillingRun(sc rowScanner, extra ...any) (ledger.BillingRun, error) {
	var r ledger.BillingRun
	var cutoff, created int64
	err := sc.Scan(append([]any{&r.ID, &r.Period, &r.Actor, &r.CatalogVersion, &cutoff, &created}, extra...)...)
	r.DataCutoff, r.CreatedAt = fromMS(cutoff), fromMS(created)
	return r, err
}

// BillingRun implements ledger.Store.
func (s *Store) BillingRun(ctx context.Context, id int64) (ledger.BillingRun, error) {
	return readRow(ctx, s, s.db, "billing run "+strconv.FormatInt(id, 10), func(sc rowScanner) (ledger.BillingRun, error) {
		var report string
		r, err := scanBillingRun(sc, &report)
		r.Report = json.RawMessage(report)
		return r, err
	}, `SELECT `+billingRunCols+`, report FROM ledger_billing_runs WHERE id = ?`, id)
}

// BillingRuns implements ledger.Store.
func (s *Store) BillingRuns(ctx context.Context, f ledger.BillingRunFilter) ([]ledger.BillingRun, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq.eq("period", f.Period)
	return readPage(ctx, s, pq, `SELECT `+billingRunCols+` FROM ledger_billing_runs`, "billing runs",
		func(r *sql.Rows) (ledger.BillingRun, error) { return scanBillingRun(r) }, func(v *ledger.BillingRun) int64 { return v.ID })
}

// ---------------------------------------------------------------- export runs

const exportRunCols = `id, period, target, status, files_json, attempts, last_error, created_ms, updated_ms, done_ms`

func scanExportRun(sc rowScanner) (ledger.ExportRun, error) {
	var r ledger.ExportRun
	var status, files string
	var created, updated, done int64
	if err := sc.Scan(&r.ID, &r.Period, &r.Target, &status, &files, &r.Attempts, &r.LastError, &created, &updated, &done); err != nil {
		return r, err
	}
	r.Status = ledger.ExportStatus(status)
	r.CreatedAt, r.UpdatedAt, r.DoneAt = fromMS(created), fromMS(updated), fromMS(done)
	if err := json.Unmarshal([]byte(files), &r.Files); err != nil {
		return r, fmt.Errorf("files of export run %d: %w", r.ID, err)
	}
	return r, nil
}

func exportView(r ledger.ExportRun) json.RawMessage {
	type view struct {
		Period    string              `json:"period"`
		Target    string              `json:"target"`
		Status    ledger.ExportStatus `json:"status"`
		Attempts  int                 `json:"attempts"`
		Files     []ledger.ExportFile `json:"files"`
		LastError string              `json:"last_error,omitempty"`
	}
	files := r.Files
	if files == nil {
		files = []ledger.ExportFile{}
	}
	return mustJSON(view{r.Period, r.Target, r.Status, r.Attempts, files, r.LastError})
}

func exportObject(id int64) string { return "export/" + strconv.FormatInt(id, 10) }

// BeginExport implements ledger.Store.
func (s *Store) BeginExport(ctx context.Context, actor string, k ledger.ExportKey) (ledger.ExportRun, bool, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.ExportRun{}, false, err
	}
	if err := ledger.CheckExportKey(k); err != nil {
		return ledger.ExportRun{}, false, err
	}
	var out ledger.ExportRun
	var started bool
	what := "export " + k.Period + " to " + k.Target
	err := s.tx(ctx, what, func(tx *sql.Tx) error {
		if err := s.lock(ctx, tx, "export/"+k.Period+"/"+k.Target); err != nil {
			return err
		}
		now := s.now()
		cur, err := scanExportRun(tx.QueryRowContext(ctx, s.d.Rebind(`SELECT `+exportRunCols+` FROM ledger_export_runs
			WHERE period = ? AND target = ?`+s.d.ForUpdate), k.Period, k.Target))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = ledger.ExportRun{ExportKey: k, Status: ledger.ExportPending, Files: []ledger.ExportFile{}, Attempts: 1,
				CreatedAt: fromMS(now.UnixMilli()), UpdatedAt: fromMS(now.UnixMilli())}
			if err := tx.QueryRowContext(ctx, s.d.Rebind(`INSERT INTO ledger_export_runs (period, target, status, attempts, created_ms, updated_ms)
				VALUES (?, ?, 'pending', 1, ?, ?) RETURNING id`), k.Period, k.Target, now.UnixMilli(), now.UnixMilli()).Scan(&out.ID); err != nil {
				return fmt.Errorf("%s ledger: cannot record %s: %w", s.d.Name, what, err)
			}
			started = true
			_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "export.begin", Object: exportObject(out.ID), After: exportView(out)})
			return err
		case err != nil:
			return fmt.Errorf("%s ledger: cannot read %s: %w", s.d.Name, what, err)
		case cur.Status == ledger.ExportDone:
			out = cur
			return nil
		}
		before := cur
		cur.Status, cur.Attempts, cur.UpdatedAt = ledger.ExportPending, cur.Attempts+1, fromMS(now.UnixMilli())
		out, started = cur, true
		return s.update(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: "export.retry", Object: exportObject(cur.ID),
			Before: exportView(before), After: exportView(cur)}, "record "+what,
			`UPDATE ledger_export_runs SET status = 'pending', attempts = ?, updated_ms = ? WHERE id = ?`, cur.Attempts, now.UnixMilli(), cur.ID)
	})
	if err != nil {
		return ledger.ExportRun{}, false, err
	}
	return out, started, nil
}

// FinishExport implements ledger.Store.
func (s *Store) FinishExport(ctx context.Context, actor string, id int64, files []ledger.ExportFile, failure string) (ledger.ExportRun, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.ExportRun{}, err
	}
	if files == nil {
		files = []ledger.ExportFile{}
	}
	what := "export run " + strconv.FormatInt(id, 10)
	var out ledger.ExportRun
	err := s.tx(ctx, "finish "+what, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := readRow(ctx, s, tx, what, scanExportRun, `SELECT `+exportRunCols+` FROM ledger_export_runs WHERE id = ?`+s.d.ForUpdate, id)
		if err != nil {
			return err
		}
		if cur.Status == ledger.ExportDone {
			return fmt.Errorf("%w: %s (%s to %s) is done; it is never changed", ledger.ErrInvalidTransition, what, cur.Period, cur.Target)
		}
		before := cur
		cur.UpdatedAt = fromMS(now.UnixMilli())
		if failure == "" {
			cur.Status, cur.Files, cur.LastError, cur.DoneAt = ledger.ExportDone, files, "", cur.UpdatedAt
		} else {
			cur.Status, cur.LastError = ledger.ExportFailed, failure
		}
		if _, err := s.exec(ctx, tx, `UPDATE ledger_export_runs SET status = ?, files_json = ?, last_error = ?, updated_ms = ?, done_ms = ?
			WHERE id = ?`, string(cur.Status), string(mustJSON(cur.Files)), cur.LastError, now.UnixMilli(), cur.DoneAt.UnixMilli()*boolInt(!cur.DoneAt.IsZero()), id); err != nil {
			return fmt.Errorf("%s ledger: cannot update %s: %w", s.d.Name, what, err)
		}
		out = cur
		action := "export.done"
		if failure != "" {
			action = "export.fail"
		}
		_, err = s.audit(ctx, tx, now, ledger.AuditRecord{Actor: actor, Action: action, Object: exportObject(id),
			Before: exportView(before), After: exportView(cur)})
		return err
	})
	if err != nil {
		return ledger.ExportRun{}, err
	}
	return out, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ExportRuns implements ledger.Store.
func (s *Store) ExportRuns(ctx context.Context, f ledger.ExportRunFilter) ([]ledger.ExportRun, string, error) {
	pq, err := listQuery(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	pq.eq("period", f.Period)
	pq.eq("target", f.Target)
	pq.eq("status", string(f.Status))
	return readPage(ctx, s, pq, `SELECT `+exportRunCols+` FROM ledger_export_runs`, "export runs",
		func(r *sql.Rows) (ledger.ExportRun, error) { return scanExportRun(r) }, func(v *ledger.ExportRun) int64 { return v.ID })
}
