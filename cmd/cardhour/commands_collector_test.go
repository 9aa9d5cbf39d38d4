//go:build collector

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The collector build answers for the node agent's commands and names the
// others as unknown rather than failing in some other way.
func TestCollectorBuildCommands(t *testing.T) {
	code, out, _ := runCLI(t, "", "version")
	require.Zero(t, code)
	require.Contains(t, out, "collector build")
	for _, name := range []string{"bill", "ingest", "migrate", "idle", "generate", "serve", "token"} {
		code, _, errOut := runCLI(t, "", name)
		require.Equal(t, 2, code, name)
		require.Contains(t, errOut, `unknown command "`+name+`"`)
	}
	code, _, errOut := runCLI(t, "", "collect", "--output", "stdout", "--simulate", "testdata/none.yaml", "--validate")
	require.NotZero(t, code, "a missing fleet file is an error")
	require.Contains(t, errOut, "none.yaml")
}
