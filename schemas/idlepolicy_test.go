package schemas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIdlePolicyExtensions(t *testing.T) {
	cat, err := LoadCatalog("testdata/catalog/idle-watch.good.yaml")
	require.NoError(t, err)
	d := cat.Defaults.Idle
	require.Equal(t, 45*time.Minute, d.RemindAfter)
	require.Equal(t, ReleaseDryRun, d.Release)
	require.False(t, d.AutoRelease)
	require.Equal(t, "22:00-08:00", d.QuietHours.String())
	// auto_release: true (the older spelling) is release: on; the rest is inherited.
	old := cat.IdlePolicyFor("old-style")
	require.Equal(t, ReleaseOn, old.Release)
	require.True(t, old.AutoRelease)
	require.Equal(t, 45*time.Minute, old.RemindAfter)
	require.NotNil(t, old.QuietHours)
	// quiet_hours: none drops the inherited window.
	agree := cat.IdlePolicyFor("agree")
	require.Equal(t, ReleaseOff, agree.Release)
	require.Nil(t, agree.QuietHours)
	// A catalog without idle settings: release off, as before.
	minimal, err := LoadCatalog("testdata/catalog/minimal.good.yaml")
	require.NoError(t, err)
	require.Equal(t, ReleaseOff, minimal.Defaults.Idle.Release)

	require.Len(t, cat.Terms, 1)
	tm, ok := cat.TermAt(time.Date(2027, 1, 17, 15, 59, 0, 0, time.UTC)) // 23:59 on the last day in Shanghai
	require.True(t, ok)
	require.Equal(t, "2026-autumn", tm.ID)
	_, ok = cat.TermAt(time.Date(2027, 1, 17, 16, 0, 0, 0, time.UTC)) // the next day in Shanghai
	require.False(t, ok)
}

func TestQuietHours(t *testing.T) {
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	wrap := QuietHours{Start: 22 * 60, End: 8 * 60}
	day := QuietHours{Start: 12 * 60, End: 13*60 + 30}
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, sh) }
	for _, c := range []struct {
		q       QuietHours
		t       time.Time
		in      bool
		nextEnd time.Time
	}{
		{wrap, at(21, 59), false, at(8, 0).AddDate(0, 0, 1)},
		{wrap, at(22, 0), true, at(8, 0).AddDate(0, 0, 1)},
		{wrap, at(3, 0), true, at(8, 0)},
		{wrap, at(8, 0), false, at(8, 0)},
		{day, at(12, 0), true, at(13, 30)},
		{day, at(13, 30), false, at(13, 30)},
		{day, at(14, 0), false, at(13, 30).AddDate(0, 0, 1)},
	} {
		require.Equal(t, c.in, c.q.Contains(c.t.UTC(), sh), "%s contains %s", c.q, c.t)
		require.True(t, c.nextEnd.Equal(c.q.NextEnd(c.t.UTC(), sh)), "%s next end after %s: %s", c.q, c.t, c.q.NextEnd(c.t, sh))
	}
}
