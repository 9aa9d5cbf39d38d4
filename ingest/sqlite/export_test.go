package sqlite

import "strings"

// LatestSamplesVersion is the schema version before the migration that
// creates latest_samples: a store at it has no such table.
var LatestSamplesVersion = func() int {
	for i, m := range migrations {
		if strings.Contains(m, "CREATE TABLE IF NOT EXISTS latest_samples") {
			return i
		}
	}
	panic("no migration creates latest_samples")
}()
