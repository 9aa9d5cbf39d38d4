package storetest_test

import (
	"testing"

	"github.com/cardhour/cardhour/internal/storetest"
)

// The in-memory store, with the packs the databases keep, reads usage from
// its packs exactly as from its runs.
func TestMemStorePackedUsage(t *testing.T) {
	for seed := range uint64(3) {
		storetest.RequirePackedUsage(t, storetest.NewPackingStore(), 100+seed)
	}
}
