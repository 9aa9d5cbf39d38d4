package reads_test

import (
	"testing"

	"github.com/cardhour/cardhour/internal/reads"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		part, whole int64
		want        string
	}{
		{0, 0, ""}, {5, 0, ""}, {0, 3600, "0.0"}, {3600, 3600, "100.0"}, {6000, 7800, "76.9"},
		{1, 3, "33.3"}, {2, 3, "66.7"}, {1, 2000, "0.1"}, {1, 2001, "0.0"}, {-1, 4, "-25.0"},
	} {
		if got := reads.Percent(c.part, c.whole); got != c.want {
			t.Errorf("Percent(%d, %d) = %q, want %q", c.part, c.whole, got, c.want)
		}
	}
	g := reads.UsageGroup{HeldSeconds: 7800, IdleSeconds: 1800}
	reads.SetEfficiency(&g)
	if g.BusySeconds != 6000 || g.Efficiency != "76.9" {
		t.Errorf("SetEfficiency: busy %d, efficiency %q; want 6000, 76.9", g.BusySeconds, g.Efficiency)
	}
}
