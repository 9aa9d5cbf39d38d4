package export

import (
	"bytes"
	"io"
)

// WriteJSON writes the documents as stored: one document is exactly its
// canonical bytes (Marshal), so the JSON export of a finalized invoice is the
// ledger's bytes; several are a JSON array of those documents, in the order given.
func WriteJSON(w io.Writer, docs ...*Document) error {
	if err := checkDocs(docs); err != nil {
		return err
	}
	if len(docs) == 1 {
		b, err := docs[0].Marshal()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, d := range docs {
		b, err := d.Marshal()
		if err != nil {
			return err
		}
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
		buf.Write(bytes.TrimSuffix(b, []byte("\n")))
	}
	buf.WriteString("\n]\n")
	_, err := w.Write(buf.Bytes())
	return err
}
