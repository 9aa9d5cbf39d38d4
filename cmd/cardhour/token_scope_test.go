package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

	code, out, errOut = runCLI(t, "", "token", "create", "--state", store, "--role", "student", "--project", "nlp-lab", "--user", "2023110042")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "cht_"), out)
	code, out, _ = runCLI(t, "", "token", "list", "--state", store)
	require.Zero(t, code)
	require.Contains(t, out, "nlp-lab")
}
