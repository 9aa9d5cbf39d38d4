package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The collector-only build (make build-collector) must stay the node agent
// alone: what it links is what every GPU node keeps resident.
//
// Each banned prefix must be linked by the full build, or banning it from the
// collector build proves nothing (a ban on a package nobody imports cannot
// fail): the test checks both sides.
func TestCollectorBuildLeavesOutTheRest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	deps := func(tags string) []string {
		args := []string{"list", "-deps"}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command(goBin, append(args, ".")...).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.Fields(string(out))
	}
	linked := func(deps []string, prefix string) string {
		for _, d := range deps {
			if strings.HasPrefix(d, prefix) {
				return d
			}
		}
		return ""
	}
	full, collector := deps(""), deps("collector,grpcnotrace")
	require.NotEmpty(t, linked(collector, "github.com/cardhour/cardhour/collector/kafkapub"))
	for _, banned := range []string{
		"github.com/cardhour/cardhour/ingest", "github.com/cardhour/cardhour/billing",
		"github.com/cardhour/cardhour/api", "github.com/cardhour/cardhour/internal/ledger",
		"github.com/cardhour/cardhour/internal/reads", "github.com/cardhour/cardhour/internal/invoicing",
		"github.com/cardhour/cardhour/internal/watch", "github.com/gin-gonic/", "github.com/danielgtaylor/huma/",
		"github.com/ClickHouse/", "modernc.org/", "golang.org/x/net/trace", "html/template",
	} {
		require.NotEmpty(t, linked(full, banned),
			"the full build does not link %s, so banning it from the collector build tests nothing: drop it from this list", banned)
		require.Empty(t, linked(collector, banned), "the collector build links %s", banned)
	}
}
