package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/reads"
)

// Usage reads hand the store the done releases that can have saved time in
// their range and scope: the fixture's release of s-bob's MIG-2 (finished
// at the fixture's now, 10 December) for December, not for November, and
// not for another student's read; the export gets them too.
func TestUsageGetsTheReleasesOfItsRangeAndScope(t *testing.T) {
	f := newFixture(t)
	want := []reads.Released{{InstanceID: "MIG-2", Node: "gpu-node-02", Project: "ai101", User: "s-bob", At: now}}
	released := func(role, query string) []reads.Released {
		t.Helper()
		f.usage.released = nil
		p := f.usagePage(t, role, query)
		require.Equal(t, int64(len(f.usage.released)), p.Total.SavedSeconds, "the report is the store's (the fake counts a second a release)")
		for i := range f.usage.released {
			f.usage.released[i].At = f.usage.released[i].At.UTC()
		}
		return f.usage.released
	}
	require.Equal(t, want, released("finance", "period=2026-12&group_by=project"))
	require.Equal(t, want, released("lead", "period=2026-12&group_by=user"))
	require.Empty(t, released("finance", "period=2026-11&group_by=project"), "finished after the range")
	require.Empty(t, released("student", "period=2026-12&group_by=sku"), "another student's release")
	require.Equal(t, want, released("admin", "from=2027-01-05T00:00:00Z&to=2027-01-06T00:00:00Z"),
		"within the horizon after it: the store decides whether the holder was back")
	require.Empty(t, released("admin", "from=2027-01-10T04:00:00Z&to=2027-01-11T00:00:00Z"), "finished a horizon or more before the range")

	f.usage.released = nil
	st, _, _ := f.export(t, "finance", "period=2026-12&group_by=project&format=csv")
	require.Equal(t, 200, st)
	require.Len(t, f.usage.released, 1)
}
