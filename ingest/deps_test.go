package ingest_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ingest writes the stored row format (schemas) and knows nothing of how
// billing reads it: the read algorithm has one home, billing. The binary
// links billing, so the ban is checked to be able to fail.
func TestIngestDoesNotImportBilling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.Fields(string(out))
	}
	const billing = "github.com/cardhour/cardhour/billing"
	require.Contains(t, deps("../cmd/cardhour"), billing, "the binary does not link billing, so the ban tests nothing")
	require.False(t, slices.Contains(deps("."), billing), "ingest imports billing")
}
