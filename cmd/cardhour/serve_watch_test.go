//go:build !collector

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServeWatch(t *testing.T) {
	dir := t.TempDir()
	store := "sqlite://" + filepath.Join(dir, "usage.db")
	code, out, errOut := runCLI(t, "", "ingest", "--store", store, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	bad := file("bad.yaml", "watch:\n  interval: soon\n")
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, bad+`:2: watch.interval: "soon" is not a positive duration`)

	// The notify: and release: sections are read by their own packages,
	// whose errors name the file, the line (the file's) and the field.
	badNotify := file("notify.yaml", "watch:\n  interval: 1s\nnotify:\n  channels: {}\n")
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", badNotify)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, badNotify+": notify config:4: channels: must be a list")

	// A section a build cannot read is refused, not ignored.
	hook := watchNotifier
	watchNotifier = nil
	t.Cleanup(func() { watchNotifier = hook })
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", badNotify)
	watchNotifier = hook
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "notify: this build has no notification channels")

	badRelease := file("release.yaml", "watch:\n  interval: 1s\nrelease:\n  default: [nowhere]\n")
	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", badRelease)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, badRelease+":")
	require.Contains(t, errOut, "line 4")
	require.Contains(t, errOut, "nowhere")

	code, _, errOut = runCLI(t, "", "serve", "--store", store, "--watch-every", "0s")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--watch-every must be positive")

	ok := file("watch.yaml", "watch:\n  interval: 1s\n  admins:\n    - {name: Ops, email: ops@example.edu}\n")
	sv := startServe(t, "--store", store, "--catalog", exampleCatalog, "--addr", "127.0.0.1:0", "--watch", ok)
	require.Eventually(t, func() bool { return strings.Contains(sv.stderr.String(), `"watcher started"`) }, 10*time.Second, 10*time.Millisecond)
	st, body := sv.get("/metrics", "")
	require.Equal(t, 200, st)
	require.Contains(t, body, "cardhour_watch_leader")
	sv.stop()
}
