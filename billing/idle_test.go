package billing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

const idleCatalog = `
currency: CNY
timezone: Asia/Shanghai
defaults: {gap_tolerance_s: 30, idle: {warn_after: 30m, release_after: 60m}}
skus: [{id: a, gpu_model: A100, profile: 1g.10gb, hourly_price: "1"}]
projects:
  - {id: course, idle: {warn_after: 10m, release_after: 20m, auto_release: true}}
  - {id: thesis}
`

func TestIdleStreaksAndAlerts(t *testing.T) {
	cat, err := schemas.ParseCatalog([]byte(idleCatalog), "idle")
	require.NoError(t, err)
	t0 := at(3, 14, 0, 0)
	min := int64(60_000)
	d := NewIdleDetector(cat)
	add := func(project, inst string, from, to int64, util float64, procs int64) {
		for ts := from; ts < to; ts += min {
			s := schemas.Sample{StartMS: ts, IntervalMS: min, Node: "n", GPUUUID: "g", GPUModel: "A100", Profile: "1g.10gb",
				InstanceID: inst, Project: project, User: "u", Processes: procs}
			if util >= 0 {
				s.Util, s.UtilKnown = util, true
			}
			d.Add(&s)
		}
	}
	// course: 25 min idle (no process, util unknown) → warning at 10 min and release at 20 min.
	add("course", "i1", t0, t0+25*min, -1, 0)
	// thesis: 45 min idle, interrupted by one busy minute after 20 → two streaks of 20 and 24 min:
	// no warning (30 min) for either. Then 40 idle minutes with a 20 s gap: one streak, warned, never released.
	add("thesis", "i2", t0, t0+20*min, 0.01, 1)
	add("thesis", "i2", t0+20*min, t0+21*min, 0.9, 1)
	add("thesis", "i2", t0+21*min, t0+45*min, 0, 0)
	add("thesis", "i3", t0, t0+20*min, 0, 1)
	add("thesis", "i3", t0+20*min+20_000, t0+40*min+20_000, 0, 1)
	// Unheld: never a streak.
	add("", "i4", t0, t0+120*min, -1, 0)

	streaks := d.Streaks(0)
	require.Len(t, streaks, 4)
	byInst := map[string][]IdleStreak{}
	for _, s := range streaks {
		byInst[s.Key.InstanceID] = append(byInst[s.Key.InstanceID], s)
	}
	require.Equal(t, 25*time.Minute, byInst["i1"][0].Duration())
	require.Equal(t, 20*time.Minute, byInst["i2"][0].Duration())
	require.Equal(t, 24*time.Minute, byInst["i2"][1].Duration())
	require.Equal(t, 40*time.Minute+20*time.Second, byInst["i3"][0].Duration(), "the 20 s gap is bridged")

	alerts := Alerts(streaks, cat.Location)
	var kinds []string
	for _, a := range alerts {
		kinds = append(kinds, string(a.Kind)+":"+a.Streak.Key.InstanceID)
	}
	require.ElementsMatch(t, []string{"idle_warning:i1", "idle_release:i1", "idle_warning:i3"}, kinds)
	for _, a := range alerts {
		if a.Kind == "idle_release" {
			require.Equal(t, t0+20*min, a.At)
			require.Contains(t, a.English, "is due for release")
			require.NotContains(t, a.English, "released.")
			require.Contains(t, a.Chinese, "已达到自动释放条件")
		}
		if a.Streak.Key.InstanceID == "i1" && a.Kind == "idle_warning" {
			require.Equal(t, t0+10*min, a.At)
			require.Contains(t, a.English, "course/u")
			require.Contains(t, a.English, "since 2026-11-03 14:00 (Asia/Shanghai)")
			require.Contains(t, a.Chinese, "空闲满 20 分钟将被自动释放")
		}
		if a.Streak.Key.InstanceID == "i3" {
			require.Contains(t, a.Chinese, "空闲时间同样计费")
		}
	}
	require.Len(t, d.Streaks(30*time.Minute), 1, "minimum length filter")
}

func TestSubtract(t *testing.T) {
	require.Equal(t, []Interval{{0, 5}, {7, 10}}, subtract([]Interval{{0, 10}}, []Interval{{5, 7}}))
	require.Equal(t, []Interval{{0, 10}}, subtract([]Interval{{0, 10}}, []Interval{{10, 12}}))
	require.Nil(t, subtract([]Interval{{0, 10}}, []Interval{{-5, 12}}))
	require.Equal(t, []Interval{{2, 3}, {20, 25}, {30, 40}}, subtract([]Interval{{0, 3}, {20, 40}}, []Interval{{-1, 2}, {15, 20}, {25, 30}}))
}
