package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/storetest"
)

// The migration that carried exact-util idle runs over to classes spells the
// class bounds in SQL: they must be ingest.IdleClassBounds.
func TestMigrationIdleClassesMatchGo(t *testing.T) {
	n := 0
	for _, m := range migrations {
		if strings.Contains(m, "INSERT INTO idle_spans") {
			storetest.RequireIdleClassSQL(t, m)
			n++
		}
	}
	require.Equal(t, 1, n)
}
