//go:build !collector

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProbe(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/slow":
			time.Sleep(500 * time.Millisecond)
		case ready:
			_, _ = w.Write([]byte("ok\n"))
		default:
			http.Error(w, "kafka unreachable", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	probe := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"probe"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := probe("--url", srv.URL+"/readyz")
	require.Equal(t, 0, code)
	require.Contains(t, out, "200 OK ok")

	ready = false
	code, _, stderr := probe("--url", srv.URL+"/readyz")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "503 Service Unavailable kafka unreachable")

	code, _, stderr = probe("--timeout", "50ms", "--url", srv.URL+"/slow")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "Client.Timeout")

	for _, bad := range [][]string{{}, {"--url", srv.URL, "extra"}, {"--url", "ftp://x/y"}, {"--url", "/readyz"}, {"--timeout", "0s", "--url", srv.URL}} {
		code, _, stderr = probe(bad...)
		require.Equal(t, 2, code, "%q: %s", bad, stderr)
	}
	srv.Close()
	code, _, _ = probe("--url", srv.URL+"/readyz")
	require.Equal(t, 1, code, "nothing listening")
}
