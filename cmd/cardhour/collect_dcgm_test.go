package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCollectDCGMFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "", "collect", "--output", "stdout", "--dcgm-url", "http://127.0.0.1:9400/metrics", "--validate")
	require.Zero(t, code, errOut)
	// Without a scrape, a 1 s interval needs no --dcgm-timeout below it.
	code, _, errOut = runCLI(t, "", "collect", "--output", "stdout", "--interval", "1s", "--validate")
	require.Zero(t, code, errOut)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dcgm-url", "127.0.0.1:9400/metrics"}, "--dcgm-url: dcgm: URL"},
		{[]string{"--dcgm-url", "ftp://n1:9400/metrics"}, "want http://host:port/path"},
		{[]string{"--dcgm-timeout", "0s"}, "--dcgm-timeout 0s: want more than 0 and less than --interval 10s"},
		{[]string{"--dcgm-url", "http://n1:9400/metrics", "--dcgm-timeout", "5s", "--interval", "5s"}, "--dcgm-timeout 5s: want more than 0 and less than --interval 5s"},
		{[]string{"--dcgm-url", "http://n1:9400/metrics", "--simulate", "../../collector/testdata/fleet.example.yaml"}, "cannot be combined with --simulate"},
	} {
		args := append([]string{"collect", "--output", "stdout", "--validate"}, tc.args...)
		code, _, errOut := runCLI(t, "", args...)
		require.Equal(t, 2, code, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
	}
}
