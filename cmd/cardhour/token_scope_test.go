//go:build !collector

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
)

// A student token is always scoped to one project: token create refuses
// --role student without --project (and stores nothing), and accepts it
// with one.
func TestTokenCreateStudentNeedsProject(t *testing.T) {
	store := "sqlite://" + filepath.Join(t.TempDir(), "usage.db")
	code, out, errOut := runCLI(t, "", "migrate", "--store", store)
	require.Zero(t, code, out+errOut)

	code, out, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "student", "--user", "2023110042")
	require.Equal(t, 1, code, out+errOut)
	require.Empty(t, out, "no secret is printed")
	require.Contains(t, errOut, "role student needs a project")
	code, out, _ = runCLI(t, "", "token", "list", "--state", store)
	require.Zero(t, code)
	require.NotContains(t, out, "student", "the refused token was not stored")

	// With a catalog stored (the project must be one of its), it is accepted.
	ctx := context.Background()
	led, err := ledgerdsn.Open(ctx, store, ledgerdsn.Options{Clock: time.Now, Existing: true})
	require.NoError(t, err)
	content, err := os.ReadFile(exampleCatalog)
	require.NoError(t, err)
	_, _, err = led.PutCatalog(ctx, "cli:test", content)
	require.NoError(t, err)
	require.NoError(t, led.Close())
	code, out, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "student", "--project", "nlp-lab", "--user", "2023110042")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "cht_"), out)
	code, out, _ = runCLI(t, "", "token", "list", "--state", store)
	require.Zero(t, code)
	require.Contains(t, out, "nlp-lab")
}
