package ingest_test

import (
	"testing"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/internal/storetest"
)

func TestMemStoreReads(t *testing.T) { storetest.RequireReads(t, ingest.NewMemStore()) }

func TestMemStoreFilteredUsage(t *testing.T) { storetest.RequireFilteredUsage(t, ingest.NewMemStore()) }

func TestMemStoreDataQuality(t *testing.T) { storetest.RequireDataQuality(t, ingest.NewMemStore()) }

func TestMemStoreEfficiency(t *testing.T) { storetest.RequireEfficiency(t, ingest.NewMemStore()) }

func TestMemStoreSavings(t *testing.T) { storetest.RequireSavings(t, ingest.NewMemStore()) }
