package invoicing

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/retry"
)

// Statement is user's statement on invoice id: derived from the stored
// project document (never recomputed), with only that user's lines and
// warnings, and the names from the project's roster.
func (s *Service) Statement(ctx context.Context, invoiceID int64, user string) ([]byte, error) {
	if strings.TrimSpace(user) == "" {
		return nil, fmt.Errorf("%w: statement: user is required", ledger.ErrInvalidArgument)
	}
	inv, err := s.cfg.Ledger.Invoice(ctx, invoiceID)
	if err != nil {
		return nil, err
	}
	rows, _, err := s.cfg.Ledger.Students(ctx, ledger.StudentFilter{Project: inv.Project, User: user, Limit: 1})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, r := range rows {
		names[r.User] = r.Name
	}
	return s.cfg.Documents.Statement(inv.Document, user, names)
}

// Webhook is the finance system that receives each exported period once.
type Webhook struct {
	URL    string // "": no webhook
	Secret []byte // HMAC-SHA256 key; required with a URL
	// Client sends the requests; nil: a client with a 60 s timeout.
	Client *http.Client
	// MaxElapsed bounds the retries of one delivery; 0: 15 minutes.
	MaxElapsed time.Duration
	// MinBackoff and MaxBackoff bound the waits between retries; 0: 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
}

func (w *Webhook) check() error {
	if w.URL == "" {
		return nil
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invoicing: webhook URL %q: want http(s)://host/path", w.URL)
	}
	if len(w.Secret) < 16 {
		return errors.New("invoicing: webhook secret: want at least 16 bytes")
	}
	return nil
}

// The webhook's headers.
const (
	HeaderSignature = "X-Cardhour-Signature" // "sha256=" + hex HMAC-SHA256(secret, timestamp + "." + body)
	HeaderTimestamp = "X-Cardhour-Timestamp" // Unix seconds
	HeaderDelivery  = "X-Cardhour-Delivery"  // the same for every retry of one delivery
)

// Sign is the signature header value of body sent at timestamp (Unix
// seconds) with secret.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a webhook request's signature and that its timestamp is
// within tolerance of now (a receiver's side of Sign).
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q: want Unix seconds", HeaderTimestamp, timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%s %s is %s from now: replayed or clock skew", HeaderTimestamp, timestamp, d)
	}
	if !hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature)) {
		return fmt.Errorf("%s does not match the body", HeaderSignature)
	}
	return nil
}

// WebhookPayload is the JSON body POSTed to the webhook.
type WebhookPayload struct {
	Period string `json:"period"`
	// Edition identifies the period's set of finalized invoices: it
	// changes when one is voided and its next revision finalized.
	Edition     string              `json:"edition"`
	Invoices    []WebhookInvoice    `json:"invoices"`     // finalized, by project
	CreditNotes []WebhookCreditNote `json:"credit_notes"` // of the period's voided invoices
	Files       []WebhookFile       `json:"files"`
}

// WebhookInvoice is one finalized invoice of the period.
type WebhookInvoice struct {
	Number   string `json:"number"`
	Project  string `json:"project"`
	Revision int    `json:"revision"`
	SHA256   string `json:"sha256"` // of the stored document
}

// WebhookCreditNote cancels a voided invoice of the period.
type WebhookCreditNote struct {
	Number        string `json:"number"`
	InvoiceNumber string `json:"invoice_number"`
	Reason        string `json:"reason"`
	SHA256        string `json:"sha256"` // of its document (in the period's files)
}

// WebhookFile is one exported file, its content base64 (encoding/json).
type WebhookFile struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	SHA256      string `json:"sha256"`
	Content     []byte `json:"content"`
}

// Export targets recorded in the ledger's export runs, as
// "<target>:<edition>": a period is exported once per edition, so that a
// reissued invoice reaches finance too.
const (
	TargetDir     = "dir"
	TargetWebhook = "webhook"
)

func target(kind, edition string) string { return kind + ":" + edition }

type exportFile struct {
	name, contentType string
	data              []byte
}

// periodState is a period's invoices as far as exporting is concerned.
type periodState struct {
	finalized []ledger.Invoice // by project, without documents
	voided    []ledger.Invoice
	drafts    []string // projects
	edition   string
}

// state lists the invoices of period and computes its edition: a hash of
// the numbers and SHA-256s of its finalized invoices.
func (s *Service) state(ctx context.Context, periodStr string) (*periodState, error) {
	if !ledgerPeriod(periodStr) {
		return nil, fmt.Errorf("%w: period %q: want YYYY-MM", ledger.ErrInvalidArgument, periodStr)
	}
	all, err := s.invoices(ctx, ledger.InvoiceFilter{Period: periodStr})
	if err != nil {
		return nil, err
	}
	st := &periodState{}
	for _, inv := range all {
		switch inv.Status {
		case ledger.StatusFinalized:
			st.finalized = append(st.finalized, inv)
		case ledger.StatusVoid:
			st.voided = append(st.voided, inv)
		case ledger.StatusDraft:
			st.drafts = append(st.drafts, inv.Project)
		}
	}
	slices.SortFunc(st.finalized, func(a, b ledger.Invoice) int { return compare(a.Project, b.Project) })
	slices.SortFunc(st.voided, func(a, b ledger.Invoice) int { return compare(a.Number, b.Number) })
	slices.Sort(st.drafts)
	var b strings.Builder
	for _, inv := range st.finalized {
		fmt.Fprintf(&b, "%s %s\n", inv.Number, inv.SHA256)
	}
	st.edition = ledger.SHA256Hex([]byte(b.String()))[:16]
	return st, nil
}

// periodExport is what is exported of a period.
type periodExport struct {
	*periodState
	files   []exportFile
	payload WebhookPayload // without files
}

// periodFiles renders the files of a finalized period from the stored
// documents: the period's CSV, XLSX and JSON (its finalized invoices, then
// the credit notes of its voided ones), and a PDF per invoice and per
// credit note.
func (s *Service) periodFiles(ctx context.Context, periodStr string) (*periodExport, error) {
	st, err := s.state(ctx, periodStr)
	if err != nil {
		return nil, err
	}
	if len(st.drafts) > 0 {
		return nil, fmt.Errorf("%w: %w: %s has drafts (projects %s): finalize them first", ErrNotFinalized, ledger.ErrInvalidTransition, periodStr, strings.Join(st.drafts, ", "))
	}
	if len(st.finalized) == 0 {
		return nil, fmt.Errorf("%w: no finalized invoice of %s", ledger.ErrNotFound, periodStr)
	}
	pe := &periodExport{periodState: st, payload: WebhookPayload{Period: periodStr, Edition: st.edition,
		Invoices: []WebhookInvoice{}, CreditNotes: []WebhookCreditNote{}}}
	credits, err := s.periodCreditNotes(ctx, pe)
	if err != nil {
		return nil, err
	}
	live, err := s.periodInvoices(ctx, pe)
	if err != nil {
		return nil, err
	}
	docs := make([][]byte, 0, len(live)+len(credits))
	for _, inv := range live {
		docs = append(docs, inv.Document)
	}
	// The period's files list its credit notes after its invoices.
	for _, cn := range credits {
		docs = append(docs, cn.Document)
	}
	if pe.files, err = s.renderPeriod(periodStr, docs, live, credits); err != nil {
		return nil, err
	}
	return pe, nil
}

// periodCreditNotes are the credit notes of the period's voided invoices,
// with their documents checked against their SHA-256, added to the payload.
func (s *Service) periodCreditNotes(ctx context.Context, pe *periodExport) ([]ledger.CreditNote, error) {
	var credits []ledger.CreditNote
	for _, v := range pe.voided {
		cns, err := s.cfg.Ledger.CreditNotes(ctx, v.ID)
		if err != nil {
			return nil, err
		}
		for _, cn := range cns {
			if cn.Document == nil { // issued before credit notes had documents
				if cn, err = s.CreditNote(ctx, cn.ID); err != nil {
					return nil, err
				}
			} else if ledger.SHA256Hex(cn.Document) != cn.SHA256 {
				return nil, fmt.Errorf("credit note %s: the stored document does not match its SHA-256 %s", cn.Number, cn.SHA256)
			}
			credits = append(credits, cn)
			pe.payload.CreditNotes = append(pe.payload.CreditNotes, WebhookCreditNote{Number: cn.Number, InvoiceNumber: cn.InvoiceNumber,
				Reason: cn.Reason, SHA256: ledger.SHA256Hex(cn.Document)})
		}
	}
	return credits, nil
}

// periodInvoices are the period's finalized invoices with their documents,
// checked against their SHA-256, added to the payload.
func (s *Service) periodInvoices(ctx context.Context, pe *periodExport) ([]ledger.Invoice, error) {
	live := slices.Clone(pe.finalized)
	for i, inv := range live {
		full, err := s.cfg.Ledger.Invoice(ctx, inv.ID)
		if err != nil {
			return nil, err
		}
		if ledger.SHA256Hex(full.Document) != full.SHA256 {
			return nil, fmt.Errorf("invoice %s: the stored document does not match its SHA-256 %s", full.Number, full.SHA256)
		}
		live[i] = full
		pe.payload.Invoices = append(pe.payload.Invoices, WebhookInvoice{Number: full.Number, Project: full.Project, Revision: full.Revision, SHA256: full.SHA256})
	}
	return live, nil
}

// renderPeriod renders the period's CSV, XLSX and JSON of docs, then a PDF
// per invoice and per credit note.
func (s *Service) renderPeriod(periodStr string, docs [][]byte, live []ledger.Invoice, credits []ledger.CreditNote) ([]exportFile, error) {
	base := "cardhour-" + periodStr
	var out []exportFile
	for _, f := range []struct {
		f    Format
		ext  string
		mime string
	}{
		{FormatCSV, ".csv", "text/csv; charset=utf-8"},
		{FormatXLSX, ".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
		{FormatJSON, ".json", "application/json"},
	} {
		var b bytes.Buffer
		if err := s.cfg.Documents.Render(&b, f.f, docs...); err != nil {
			return nil, fmt.Errorf("rendering %s%s: %w", base, f.ext, err)
		}
		out = append(out, exportFile{base + f.ext, f.mime, b.Bytes()})
	}
	for _, inv := range live {
		var b bytes.Buffer
		if err := s.cfg.Documents.Render(&b, FormatPDF, inv.Document); err != nil {
			return nil, fmt.Errorf("rendering the PDF of invoice %s: %w", inv.Number, err)
		}
		out = append(out, exportFile{"invoice-" + inv.Number + ".pdf", "application/pdf", b.Bytes()})
	}
	for _, cn := range credits {
		var b bytes.Buffer
		if err := s.cfg.Documents.Render(&b, FormatPDF, cn.Document); err != nil {
			return nil, fmt.Errorf("rendering the PDF of credit note %s: %w", cn.Number, err)
		}
		out = append(out, exportFile{"credit-note-" + cn.Number + ".pdf", "application/pdf", b.Bytes()})
	}
	return out, nil
}

func ledgerPeriod(p string) bool {
	if len(p) != 7 || p[4] != '-' {
		return false
	}
	y, err1 := strconv.Atoi(p[:4])
	m, err2 := strconv.Atoi(p[5:])
	return err1 == nil && err2 == nil && y >= 1970 && m >= 1 && m <= 12
}

func fileRecords(files []exportFile) []ledger.ExportFile {
	out := make([]ledger.ExportFile, len(files))
	for i, f := range files {
		out[i] = ledger.ExportFile{Name: f.name, SHA256: ledger.SHA256Hex(f.data), Bytes: int64(len(f.data))}
	}
	return out
}

// ExportPeriod writes the files of period, whose invoices must all be
// finalized, into dir (each atomically: a temporary file renamed into
// place), rendered from the stored documents only, and returns their
// paths. The first export of the period is recorded in the ledger (export
// run "dir"); with a webhook configured the files are also POSTed to it,
// once: a period the webhook has acknowledged (2xx) is never sent again.
func (s *Service) ExportPeriod(ctx context.Context, actor, periodStr, dir string) ([]string, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: export of %s: a directory is required", ledger.ErrInvalidArgument, periodStr)
	}
	pe, err := s.periodFiles(ctx, periodStr)
	if err != nil {
		return nil, err
	}
	files := pe.files
	run, started, err := s.cfg.Ledger.BeginExport(ctx, actor, ledger.ExportKey{Period: periodStr, Target: target(TargetDir, pe.edition)})
	if err != nil {
		return nil, err
	}
	paths, werr := writeFiles(dir, files)
	if started {
		failure := ""
		if werr != nil {
			failure = werr.Error()
		}
		if _, err := s.cfg.Ledger.FinishExport(ctx, actor, run.ID, fileRecords(files), failure); err != nil {
			return nil, errors.Join(werr, err)
		}
	}
	if werr != nil {
		return nil, werr
	}
	if s.cfg.Webhook.URL != "" {
		if err := s.deliver(ctx, actor, pe); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

func writeFiles(dir string, files []exportFile) ([]string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("export directory: %w", err)
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := writeAtomic(p, f.data); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func writeAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err = os.Chmod(tmp.Name(), 0o640); err != nil { //nolint:gosec // exports are read by the finance group
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// deliver POSTs the files to the webhook unless a delivery of the period
// was acknowledged before, retrying with backoff; the export run records
// the outcome.
func (s *Service) deliver(ctx context.Context, actor string, pe *periodExport) error {
	periodStr, files := pe.payload.Period, pe.files
	run, started, err := s.cfg.Ledger.BeginExport(ctx, actor, ledger.ExportKey{Period: periodStr, Target: target(TargetWebhook, pe.edition)})
	if err != nil || !started {
		return err
	}
	payload := pe.payload
	for _, f := range files {
		payload.Files = append(payload.Files, WebhookFile{Name: f.name, ContentType: f.contentType, SHA256: ledger.SHA256Hex(f.data), Content: f.data})
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	w := s.cfg.Webhook
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	lo, hi, maxElapsed := w.MinBackoff, w.MaxBackoff, w.MaxElapsed
	if lo <= 0 {
		lo = time.Second
	}
	if hi <= 0 {
		hi = time.Minute
	}
	if maxElapsed <= 0 {
		maxElapsed = 15 * time.Minute
	}
	delivery := fmt.Sprintf("%s/%s/%d", periodStr, target(TargetWebhook, pe.edition), run.ID)
	_, perr := backoff.Retry(ctx, func() (struct{}, error) {
		ts := strconv.FormatInt(s.now().Unix(), 10)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
		if err != nil {
			return struct{}{}, backoff.Permanent(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(w.Secret, ts, body))
		req.Header.Set(HeaderDelivery, delivery)
		resp, err := client.Do(req)
		if err != nil {
			return struct{}{}, fmt.Errorf("POST %s: %w", w.URL, err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return struct{}{}, nil
		case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return struct{}{}, fmt.Errorf("POST %s: %s: %s", w.URL, resp.Status, bytes.TrimSpace(msg))
		default: // the request itself is refused: retrying sends the same
			return struct{}{}, backoff.Permanent(fmt.Errorf("POST %s: %s: %s", w.URL, resp.Status, bytes.TrimSpace(msg)))
		}
	}, backoff.WithBackOff(retry.Backoff(lo, hi)), backoff.WithMaxElapsedTime(maxElapsed),
		backoff.WithNotify(func(err error, next time.Duration) {
			s.log.Warn("webhook delivery failed; retrying", "period", periodStr, "err", err, "retry_in", next)
		}))
	failure := ""
	if perr != nil {
		failure = perr.Error()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.cfg.Ledger.FinishExport(fctx, actor, run.ID, fileRecords(files), failure); err != nil {
		return errors.Join(perr, err)
	}
	if perr != nil {
		return fmt.Errorf("webhook delivery of %s: %w", periodStr, perr)
	}
	return nil
}

// ExportJobActor is the actor the export job records.
const ExportJobActor = "export-job"

// ExportJob exports every period whose invoices are all finalized and that
// was not exported yet (to Config.ExportDir, and to the webhook when one
// is configured), each once; it returns the periods it exported.
func (s *Service) ExportJob(ctx context.Context) ([]string, error) {
	if s.cfg.ExportDir == "" && s.cfg.Webhook.URL == "" {
		return nil, nil
	}
	finalized, err := s.invoices(ctx, ledger.InvoiceFilter{Status: ledger.StatusFinalized})
	if err != nil {
		return nil, err
	}
	drafts, err := s.invoices(ctx, ledger.InvoiceFilter{Status: ledger.StatusDraft})
	if err != nil {
		return nil, err
	}
	open := map[string]bool{}
	for _, d := range drafts {
		open[d.Period] = true
	}
	var periods []string
	for _, f := range finalized {
		if !open[f.Period] {
			periods = append(periods, f.Period)
		}
	}
	slices.Sort(periods)
	periods = slices.Compact(periods)
	var done []string
	var errs []error
	for _, p := range periods {
		st, err := s.state(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.exported(ctx, p, st.edition) {
			continue
		}
		if err := s.exportOnce(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("export of %s: %w", p, err))
			continue
		}
		done = append(done, p)
		s.log.Info("period exported", "period", p)
	}
	return done, errors.Join(errs...)
}

// exported reports whether every configured target has this edition of
// period.
func (s *Service) exported(ctx context.Context, period, edition string) bool {
	var targets []string
	if s.cfg.ExportDir != "" {
		targets = append(targets, target(TargetDir, edition))
	}
	if s.cfg.Webhook.URL != "" {
		targets = append(targets, target(TargetWebhook, edition))
	}
	for _, t := range targets {
		runs, _, err := s.cfg.Ledger.ExportRuns(ctx, ledger.ExportRunFilter{Period: period, Target: t, Status: ledger.ExportDone, Limit: 1})
		if err != nil || len(runs) == 0 {
			return false
		}
	}
	return true
}

func (s *Service) exportOnce(ctx context.Context, period string) error {
	if s.cfg.ExportDir != "" {
		_, err := s.ExportPeriod(ctx, ExportJobActor, period, s.cfg.ExportDir)
		return err
	}
	pe, err := s.periodFiles(ctx, period)
	if err != nil {
		return err
	}
	return s.deliver(ctx, ExportJobActor, pe)
}

// ExportLoop runs ExportJob every interval while holder leads (ledger lease
// LeaseExport), until ctx ends.
func (s *Service) ExportLoop(ctx context.Context, holder string, every time.Duration) error {
	return s.leaderLoop(ctx, LeaseExport, holder, every, func(ctx context.Context) error {
		_, err := s.ExportJob(ctx)
		return err
	})
}
