package clickhouse_test

import (
	"testing"

	"github.com/cardhour/cardhour/ingest/ingesttest"
	"github.com/cardhour/cardhour/internal/testenv"
)

func TestClickHouseReads(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	ingesttest.RequireReads(t, st)
}
