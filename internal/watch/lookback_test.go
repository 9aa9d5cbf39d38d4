package watch

import (
	"testing"
	"time"

	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// A cycle reads as much history as its longest policy needs (with its quiet
// hours), at least 2 h and at most reads.HeldLookback.
func TestHeldLookback(t *testing.T) {
	pol := func(warn, remind, release time.Duration, q *schemas.QuietHours) schemas.IdlePolicy {
		return schemas.IdlePolicy{Threshold: 0.05, WarnAfter: warn, RemindAfter: remind, ReleaseAfter: release, QuietHours: q}
	}
	cat := func(def schemas.IdlePolicy, projects ...schemas.IdlePolicy) *schemas.Catalog {
		c := &schemas.Catalog{Defaults: schemas.Defaults{GapToleranceMS: (5 * time.Minute).Milliseconds(), Idle: def}}
		for i := range projects {
			c.Projects = append(c.Projects, schemas.Project{ID: "p", Idle: &projects[i]})
		}
		return c
	}
	for _, tc := range []struct {
		name string
		cat  *schemas.Catalog
		want time.Duration
	}{
		{"short policies: at least 2 h", cat(pol(10*time.Minute, 0, 20*time.Minute, nil)), 2 * time.Hour},
		{"the default policy (release after 1 h)", cat(schemas.DefaultIdlePolicy), time.Hour + 10*time.Minute + time.Hour},
		{"a project releasing after 4 h", cat(schemas.DefaultIdlePolicy, pol(time.Hour, 2*time.Hour, 4*time.Hour, nil)),
			4*time.Hour + 10*time.Minute + time.Hour},
		{"quiet hours 22:00-08:00 add their 10 h", cat(pol(30*time.Minute, 0, time.Hour, &schemas.QuietHours{Start: 22 * 60, End: 8 * 60})),
			time.Hour + 10*time.Hour + 10*time.Minute + time.Hour},
		{"a policy longer than a day: the whole look-back", cat(pol(30*time.Hour, 0, 48*time.Hour, nil)), reads.HeldLookback},
	} {
		if got := heldLookback(tc.cat); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
