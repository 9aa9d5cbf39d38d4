package invoicing

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/ledger"
)

// ExportDocuments is Documents with the invoice document of billing/export:
// the default of Config.Documents.
type ExportDocuments struct {
	PDF export.PDFOptions // the font of PDF exports
}

// Build builds one document per project with the roster's names.
func (ExportDocuments) Build(res *billing.Result, m Meta, names map[string]map[string]string) ([]ProjectDocument, error) {
	docs := export.Build(res, export.Meta{CatalogVersion: m.CatalogVersion, DataCutoff: m.DataCutoff, GeneratedAt: m.GeneratedAt})
	out := make([]ProjectDocument, 0, len(docs))
	for i := range docs {
		d := &docs[i]
		d.SetNames(names[d.Project])
		b, err := d.Marshal()
		if err != nil {
			return nil, err
		}
		out = append(out, ProjectDocument{Project: d.Project, Document: b})
	}
	return out, nil
}

// Summary reads a stored document's total and lines.
func (ExportDocuments) Summary(b []byte) (DocSummary, error) {
	d, err := export.Parse(b)
	if err != nil {
		return DocSummary{}, err
	}
	s := DocSummary{Project: d.Project, Period: d.Period, Number: d.Number, Total: d.Total, Name: d.Name, Funding: d.Funding, Currency: d.Currency}
	for _, l := range d.Lines {
		s.Lines = append(s.Lines, DocLine{Kind: l.Kind, User: l.User, SKU: l.SKU, Amount: l.Amount})
	}
	return s, nil
}

// Stamp writes the number and issue time into a document.
func (ExportDocuments) Stamp(doc []byte, number string, at time.Time) ([]byte, error) {
	return export.Stamp(doc, number, at)
}

// Statement derives user's statement from a project document.
func (ExportDocuments) Statement(doc []byte, user string, names map[string]string) ([]byte, error) {
	d, err := export.Parse(doc)
	if err != nil {
		return nil, err
	}
	st := d.Statement(user)
	st.SetNames(names)
	return st.Marshal()
}

// Render writes docs in format f; a PDF holds exactly one document.
func (e ExportDocuments) Render(w io.Writer, f Format, docs ...[]byte) error {
	ds := make([]*export.Document, 0, len(docs))
	for i, b := range docs {
		d, err := export.Parse(b)
		if err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
		ds = append(ds, d)
	}
	return e.render(w, f, ds)
}

// RenderVoided writes a voided invoice's document with its void mark
// (export.Document.Void: the renderers draw 已作废 / VOID and the credit
// note's number); the stored bytes stay as they are.
func (e ExportDocuments) RenderVoided(w io.Writer, f Format, doc []byte, mark export.VoidMark) error {
	d, err := export.Parse(doc)
	if err != nil {
		return err
	}
	d.Void = &mark
	return e.render(w, f, []*export.Document{d})
}

// Reissue is export.Reissue.
func (ExportDocuments) Reissue(voided []byte) ([]byte, error) { return export.Reissue(voided) }

// CreditNote is export.CreditNote.
func (ExportDocuments) CreditNote(voided []byte, number string, at time.Time) ([]byte, error) {
	return export.CreditNote(voided, number, at)
}

// SameContent is export.SameContent.
func (ExportDocuments) SameContent(a, b []byte) (bool, error) { return export.SameContent(a, b) }

// renderHook, when set (by tests), sees the documents each rendering gets.
var renderHook func(f Format, ds []*export.Document)

func (e ExportDocuments) render(w io.Writer, f Format, ds []*export.Document) error {
	if renderHook != nil {
		renderHook(f, ds)
	}
	switch f {
	case FormatCSV:
		return export.WriteCSV(w, ds...)
	case FormatXLSX:
		return export.WriteXLSX(w, ds...)
	case FormatJSON:
		return export.WriteJSON(w, ds...)
	case FormatPDF:
		if len(ds) != 1 {
			return fmt.Errorf("%w: a PDF holds one document, not %d", ledger.ErrInvalidArgument, len(ds))
		}
		// Buffered: a failed rendering writes nothing.
		var buf bytes.Buffer
		if err := export.WritePDF(&buf, ds[0], e.PDF); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	return fmt.Errorf("%w: format %q: want csv, xlsx, pdf or json", ledger.ErrInvalidArgument, f)
}
