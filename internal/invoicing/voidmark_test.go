package invoicing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/invoicing"
	"github.com/cardhour/cardhour/internal/ledger"
)

// A voided invoice's exports carry its latest credit note, when and why it
// was voided: the document's own export.VoidMark, the one the API keys its
// export cache by and the renderers draw.
func TestVoidMarkIsTheLatestCreditNote(t *testing.T) {
	at := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	inv := ledger.Invoice{ID: 7, Status: ledger.StatusVoid, VoidedAt: at, VoidReason: "wrong SKU"}
	cns := []ledger.CreditNote{{Number: "2026-000001-CN1"}, {Number: "2026-000001-CN2"}}
	require.Equal(t, export.VoidMark{CreditNote: "2026-000001-CN2", VoidedAt: at, Reason: "wrong SKU"}, invoicing.VoidMarkOf(inv, cns))
	require.Equal(t, export.VoidMark{VoidedAt: at, Reason: "wrong SKU"}, invoicing.VoidMarkOf(inv, nil))
}
