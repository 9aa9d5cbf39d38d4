package ingest_test

import (
	"testing"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/ingesttest"
)

func TestMemStoreReads(t *testing.T) { ingesttest.RequireReads(t, ingest.NewMemStore()) }
