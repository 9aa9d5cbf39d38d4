//go:build !collector

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveServicesChecks runs the usage reads and the invoice flow against a
// server on the example usage (SQLite, or PostgreSQL and ClickHouse; started
// with a grace period already over for November 2026): run, finalize,
// export, roster, void, and a student's view.
func serveServicesChecks(t *testing.T, sv *served, admin string) {
	t.Helper()
	st, body := sv.get("/api/v1/usage?period=2026-11&group_by=project,day", admin)
	require.Equal(t, 200, st, body)
	var usage struct {
		Rows []struct {
			Project     string `json:"project"`
			Day         string `json:"day"`
			HeldSeconds int64  `json:"held_seconds"`
			Cost        string `json:"cost"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &usage))
	require.NotEmpty(t, usage.Rows)
	require.NotEmpty(t, usage.Rows[0].Day)
	require.Contains(t, body, `"nlp-lab"`)
	st, body = sv.get("/api/v1/held", admin)
	require.Equal(t, 200, st, body)

	st, body = sv.request("POST", "/api/v1/billing-runs", admin, "application/json", `{"period":"2026-11"}`)
	require.Equal(t, 200, st, body)
	var run struct {
		Drafts []struct {
			Project   string `json:"project"`
			InvoiceID int64  `json:"invoice_id"`
			SHA256    string `json:"sha256"`
		} `json:"drafts"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &run))
	require.NotEmpty(t, run.Drafts)
	var id int64
	var sha string
	for _, d := range run.Drafts {
		if d.Project == "nlp-lab" {
			id, sha = d.InvoiceID, d.SHA256
		}
	}
	require.NotZero(t, id, body)
	st, body = sv.request("POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", id), admin, "application/json", fmt.Sprintf(`{"if_sha256":%q}`, sha))
	require.Equal(t, 200, st, body)
	require.Contains(t, body, `"status":"finalized"`)
	for _, f := range []string{"csv", "xlsx", "pdf", "json"} {
		st1, b1 := sv.get(fmt.Sprintf("/api/v1/invoices/%d/export?format=%s", id, f), admin)
		require.Equal(t, 200, st1, b1)
		st2, b2 := sv.get(fmt.Sprintf("/api/v1/invoices/%d/export?format=%s", id, f), admin)
		require.Equal(t, 200, st2)
		require.Equal(t, b1, b2, "a finalized invoice exports the same bytes")
	}
	st, body = sv.get("/api/v1/periods/2026-11/export?format=xlsx", admin)
	require.Equal(t, 200, st, body)

	// A student of nlp-lab sees only themself.
	st, body = sv.get(fmt.Sprintf("/api/v1/invoices/%d", id), admin)
	require.Equal(t, 200, st)
	var inv struct {
		Document struct {
			Lines []struct {
				User string `json:"user"`
			} `json:"lines"`
		} `json:"document"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &inv))
	users := map[string]bool{}
	for _, l := range inv.Document.Lines {
		if l.User != "" {
			users[l.User] = true
		}
	}
	require.Greater(t, len(users), 1, "the example invoice has several students")
	var me string
	for u := range users {
		me = u
		break
	}
	st, body = sv.request("POST", "/api/v1/tokens", admin, "application/json", fmt.Sprintf(`{"role":"student","user":%q,"project":"nlp-lab"}`, me))
	require.Equal(t, 201, st, body)
	var tok struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &tok))
	for _, u := range []string{
		"/api/v1/usage?period=2026-11&group_by=user,sku,day",
		"/api/v1/held",
		fmt.Sprintf("/api/v1/invoices/%d/statements/%s", id, me),
		fmt.Sprintf("/api/v1/invoices/%d/statements/%s/export?format=csv", id, me),
	} {
		st, body = sv.get(u, tok.Secret)
		require.Equal(t, 200, st, "%s: %s", u, body)
		for other := range users {
			if other != me {
				require.NotContains(t, body, other, "%s names another student", u)
			}
		}
	}
	for other := range users {
		if other != me {
			st, _ = sv.get(fmt.Sprintf("/api/v1/invoices/%d/statements/%s", id, other), tok.Secret)
			require.Equal(t, 403, st)
		}
	}

	// A roster import names the bad line and field; a good one replaces the roster.
	st, body = sv.request("POST", "/api/v1/projects/nlp-lab/roster", admin, "text/csv", "student_id,name,email\n2023110042,Li Lei,li@example.edu\n,Han Meimei,\n")
	require.Equal(t, 422, st, body)
	require.Contains(t, body, `"line":3`)
	require.Contains(t, body, `"field":"student_id"`)
	st, body = sv.request("POST", "/api/v1/projects/nlp-lab/roster", admin, "text/csv", "student_id,name,email\n2023110042,Li Lei,li@example.edu\n")
	require.Equal(t, 200, st, body)
	st, body = sv.get("/api/v1/projects/nlp-lab/students", admin)
	require.Equal(t, 200, st, body)
	require.Contains(t, body, "Li Lei")

	st, body = sv.request("POST", fmt.Sprintf("/api/v1/invoices/%d/void", id), admin, "application/json", `{"reason":"test"}`)
	require.Equal(t, 200, st, body)
	require.True(t, strings.Contains(body, `"credit_note"`) && strings.Contains(body, "-CN1"), body)
}

// Finalizing inside the grace period is refused with its own problem type.
func TestServeRefusesFinalizeInGrace(t *testing.T) {
	store := "sqlite://" + t.TempDir() + "/usage.db"
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "finance")
	require.Zero(t, code, errOut)
	fin := strings.TrimSpace(out)
	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1000000h")
	st, body := sv.request("POST", "/api/v1/billing-runs", fin, "application/json", `{"period":"2026-11"}`)
	require.Equal(t, 200, st, body)
	var run struct {
		Drafts []struct {
			InvoiceID int64  `json:"invoice_id"`
			SHA256    string `json:"sha256"`
		} `json:"drafts"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &run))
	require.NotEmpty(t, run.Drafts)
	d := run.Drafts[0]
	st, body = sv.request("POST", fmt.Sprintf("/api/v1/invoices/%d/finalize", d.InvoiceID), fin, "application/json", fmt.Sprintf(`{"if_sha256":%q}`, d.SHA256))
	require.Equal(t, 409, st, body)
	require.Contains(t, body, `"type":"https://cardhour.dev/problems/grace-period"`)
	sv.stop()
}

// With --auto-finalize and --export-dir, a billing run's drafts of a period
// past its grace are finalized and the period's files written, by serve's
// background jobs.
func TestServeJobsFinalizeAndExport(t *testing.T) {
	dir := t.TempDir()
	store := "sqlite://" + dir + "/usage.db"
	out := filepath.Join(dir, "exports")
	require.NoError(t, os.Mkdir(out, 0o755))
	code, o, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, o+errOut)
	code, o, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "finance")
	require.Zero(t, code, errOut)
	fin := strings.TrimSpace(o)
	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--grace", "1s",
		"--auto-finalize", "--export-dir", out, "--jobs-every", "50ms")
	st, body := sv.request("POST", "/api/v1/billing-runs", fin, "application/json", `{"period":"2026-11"}`)
	require.Equal(t, 200, st, body)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(out, "cardhour-2026-11.xlsx"))
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, sv.stderr.String())
	st, body = sv.get("/api/v1/invoices?period=2026-11&status=draft", fin)
	require.Equal(t, 200, st)
	require.Contains(t, body, `"items":[]`)
	sv.stop()
}
