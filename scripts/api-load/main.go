// Command api-load measures the latency of API requests at a fixed rate
// (open loop: requests start on schedule whether or not earlier ones have
// answered, so a slow server shows as latency, not as a lower rate):
//
//	api-load --url 'http://127.0.0.1:8080/api/v1/usage?group_by=project,day&period=2026-11' \
//	         --token cht_… --rate 200 --duration 30s
//
// --url may be given several times: requests go to the URLs in turn (a mix
// of questions, e.g. usage of each project). It prints requests, errors (transport errors and non-2xx), p50, p90, p99
// and max latency, and the rate achieved; --warmup requests are sent first
// and not counted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

func main() {
	var urls []string
	flag.Func("url", "a URL to GET (repeatable: requests take the URLs in turn)", func(v string) error {
		urls = append(urls, v)
		return nil
	})
	token := flag.String("token", os.Getenv("CARDHOUR_TOKEN"), "bearer token (default $CARDHOUR_TOKEN)")
	rate := flag.Float64("rate", 200, "requests per second")
	duration := flag.Duration("duration", 30*time.Second, "how long to send")
	warmup := flag.Int("warmup", 50, "requests sent before measuring")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request timeout")
	flag.Parse()
	if len(urls) == 0 || *rate <= 0 || *duration <= 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: api-load --url URL [--url URL2 …] [--token T] [--rate 200] [--duration 30s]")
		os.Exit(2)
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}
	get := func(ctx context.Context, i int) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, urls[i%len(urls)], nil)
		if err != nil {
			return 0, err
		}
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		took := time.Since(start)
		if err == nil && (res.StatusCode < 200 || res.StatusCode > 299) {
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		return took, err
	}
	ctx := context.Background()
	for i := range max(*warmup, len(urls)) {
		if _, err := get(ctx, i); err != nil {
			fmt.Fprintln(os.Stderr, "api-load: warm-up:", err)
			os.Exit(1)
		}
	}

	interval := time.Duration(float64(time.Second) / *rate)
	n := int(duration.Seconds() * *rate)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() { lat[i], errs[i] = get(ctx, i) })
	}
	sent := time.Since(start)
	wg.Wait()

	var ok []time.Duration
	nerr := 0
	var firstErr error
	for i := range n {
		if errs[i] != nil {
			nerr++
			if firstErr == nil {
				firstErr = errs[i]
			}
			continue
		}
		ok = append(ok, lat[i])
	}
	slices.Sort(ok)
	q := func(p float64) time.Duration {
		if len(ok) == 0 {
			return 0
		}
		return ok[min(len(ok)-1, int(p*float64(len(ok))))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("requests %d in %s (%.0f/s), errors %d, p50 %s, p90 %s, p99 %s, max %s\n",
		n, sent.Round(time.Millisecond), float64(n)/sent.Seconds(), nerr, ms(q(0.50)), ms(q(0.90)), ms(q(0.99)), ms(q(1)))
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "api-load: first error:", firstErr)
		os.Exit(1)
	}
}
