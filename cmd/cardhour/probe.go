//go:build !collector

package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// runProbe GETs one URL and exits 0 on a 2xx answer, 1 otherwise: the health
// check of a container whose image has no shell or HTTP client (the
// distroless images of deployments/docker), e.g. in deployments/compose:
//
//	cardhour probe --url http://127.0.0.1:8080/readyz
func runProbe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("url", "", "the http:// or https:// URL to GET")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour probe --url http://HOST:PORT/PATH [--timeout 3s]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "cardhour probe: --url %q: want an http:// or https:// URL with a host\n", *target)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "cardhour probe: --timeout must be positive")
		return 2
	}
	resp, err := (&http.Client{Timeout: *timeout}).Get(u.String())
	if err != nil {
		fmt.Fprintln(stderr, "cardhour probe:", err)
		return 1
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "cardhour probe: %s: %s %s\n", u, resp.Status, msg)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s %s\n", u, resp.Status, msg)
	return 0
}
