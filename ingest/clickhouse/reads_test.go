package clickhouse_test

import (
	"testing"

	"github.com/cardhour/cardhour/internal/storetest"
	"github.com/cardhour/cardhour/internal/testenv"
)

func TestClickHouseReads(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequireReads(t, st)
}

func TestClickHouseFilteredUsage(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequireFilteredUsage(t, st)
}

func TestClickHouseDataQuality(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequireDataQuality(t, st)
}

func TestClickHouseEfficiency(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequireEfficiency(t, st)
}

func TestClickHouseSavings(t *testing.T) {
	st := open(t, testenv.ClickHouseAddr(t), testenv.UniqueName(t, "ch"))
	storetest.RequireSavings(t, st)
}
