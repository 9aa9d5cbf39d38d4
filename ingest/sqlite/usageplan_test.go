package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// The filtered usage reads are served by the indexes the migrations add: a
// read of one project or one user searches its runs by key and end, a read
// of one node its raw samples by node and start, instead of scanning every
// run or sample of the range.
func TestUsageReadsUseIndexes(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "cardhour.db"), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	plan := func(query string, args []any) string {
		t.Helper()
		rows, err := st.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
		require.NoError(t, err)
		defer rows.Close() //nolint:errcheck // test
		var out []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			out = append(out, detail)
		}
		require.NoError(t, rows.Err())
		return strings.Join(out, "; ")
	}
	const from, to = 1_793_000_000_000, 1_795_000_000_000
	month := schemas.UsageRowQuery{FromMS: from, ToMS: to, ByUser: true}
	project, user, node := month, month, month
	project.Projects = []string{"nlp-lab"}
	user.Users = []string{"alice"}
	node.Nodes = []string{"n1"}
	for _, c := range []struct {
		name, want string
		sql        func() (string, []any)
	}{
		{"occupancy of a project", "SEARCH occupancy USING COVERING INDEX occupancy_project_end (project=? AND end_ms>?)",
			func() (string, []any) { return occupancyOfSQL(project, from, to) }},
		{"occupancy of a user", "SEARCH occupancy USING COVERING INDEX occupancy_user_end (user=? AND end_ms>?)",
			func() (string, []any) { return occupancyOfSQL(user, from, to) }},
		{"idle runs of a project", "SEARCH idle_spans USING COVERING INDEX idle_spans_project_end (project=? AND end_ms>?)",
			func() (string, []any) { return idleRunsOfSQL(project, from, to, 0.5) }},
		{"idle runs of a user", "SEARCH idle_spans USING COVERING INDEX idle_spans_user_end (user=? AND end_ms>?)",
			func() (string, []any) { return idleRunsOfSQL(user, from, to, 0.5) }},
		{"raw samples of a node", "SEARCH raw_samples USING INDEX raw_samples_node_start (node=? AND start_ms>? AND start_ms<?)",
			func() (string, []any) { return ingest.UsageSQL(dialect, node) }},
	} {
		require.Contains(t, plan(c.sql()), c.want, c.name)
	}
}
