package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The collector-only build (make build-collector) must stay the node agent
// alone: what it links is what every GPU node keeps resident.
func TestCollectorBuildLeavesOutTheRest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-tags", "collector,grpcnotrace", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/cardhour/cardhour/collector/kafkapub")
	for _, d := range deps {
		for _, banned := range []string{
			"github.com/cardhour/cardhour/ingest", "github.com/cardhour/cardhour/billing",
			"github.com/ClickHouse/", "modernc.org/", "github.com/gin-gonic/",
			"golang.org/x/net/trace", "html/template",
		} {
			require.False(t, strings.HasPrefix(d, banned), "the collector build links %s", d)
		}
	}
}
