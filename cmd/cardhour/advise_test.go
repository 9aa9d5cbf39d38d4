//go:build !collector

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/schemas"
)

// t4Samples writes worked example 1 of docs/billing.md as hourly samples: two
// T4 cards held by ai101 from September to November 2026 and a third from
// 5 to 15 October (Asia/Shanghai).
func t4Samples(t *testing.T) string {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	var b []byte
	add := func(inst string, from, to time.Time) {
		for ts := from; ts.Before(to); ts = ts.Add(time.Hour) {
			s := schemas.Sample{StartMS: ts.UnixMilli(), IntervalMS: 3_600_000, Node: "gpu-node-09", GPUUUID: inst, GPUModel: "Tesla T4",
				InstanceID: inst, Profile: "full", Project: "ai101", User: "2025010001", UtilKnown: true, Util: 0.7, Processes: 1,
				MemUsed: 1 << 30, MemTotal: 16 << 30}
			b = append(s.AppendJSON(b), '\n')
		}
	}
	add("GPU-t4-1", time.Date(2026, 9, 1, 0, 0, 0, 0, loc), time.Date(2026, 12, 1, 0, 0, 0, 0, loc))
	add("GPU-t4-2", time.Date(2026, 9, 1, 0, 0, 0, 0, loc), time.Date(2026, 12, 1, 0, 0, 0, 0, loc))
	add("GPU-t4-3", time.Date(2026, 10, 5, 0, 0, 0, 0, loc), time.Date(2026, 10, 15, 0, 0, 0, 0, loc))
	path := filepath.Join(t.TempDir(), "t4.jsonl")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func TestAdviseWorkedExample(t *testing.T) {
	samples := t4Samples(t)
	code, out, errOut := runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", samples, "--now", "2026-12-01", "--project", "ai101", "--format", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "cardhour advise: 2026-09 to 2026-11")
	require.Contains(t, errOut, "pricing 1 project and SKU pairs")
	var rep struct {
		From, To string
		Advice   []struct {
			Project, SKU, Advised, Saving string
			Mix                           struct{ Year int64 }
			Text                          map[string]string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, "2026-09", rep.From)
	require.Len(t, rep.Advice, 1)
	a := rep.Advice[0]
	require.Equal(t, "t4-16g", a.SKU)
	require.Equal(t, int64(2), a.Mix.Year)
	require.Equal(t, "4752.00", a.Advised)
	require.Equal(t, "3542.40", a.Saving)
	require.Contains(t, a.Text["zh-CN"], "2 个年付预留")

	code, out, errOut = runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", samples, "--now", "2026-12-01T09:00:00+08:00", "--project", "ai101")
	require.Equal(t, 0, code, errOut)
	golden(t, "advise-t4.txt", out)

	// The same from a store written by ingest: the same advice, byte for byte.
	store := "sqlite://" + filepath.Join(t.TempDir(), "usage.db")
	code, out, errOut = runCLI(t, "", "ingest", "--store", store, "--from-file", samples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, fromStore, errOut := runCLI(t, "", "advise", "--catalog", exampleCatalog, "--store", store, "--now", "2026-12-01T09:00:00+08:00")
	require.Equal(t, 0, code, errOut)
	code, fromFile, errOut := runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", samples, "--now", "2026-12-01T09:00:00+08:00")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fromFile, fromStore)
	require.Contains(t, fromStore, "nlp-lab / a100-80g-1g.10gb #0 (2×year from 2026-09): coverage 0.0 %")

	code, out, errOut = runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", samples, "--now", "2026-12", "--format", "csv", "--months", "1")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, "kind,project,sku,peak,"), out)
	require.Contains(t, out, "underused,nlp-lab,a100-80g-1g.10gb")
}

func TestAdviseErrors(t *testing.T) {
	code, _, errOut := runCLI(t, "", "advise", "--catalog", exampleCatalog)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--samples or --store is required")
	code, _, errOut = runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", exampleSamples, "--months", "0", "--min-coverage", "1.5", "--format", "xml")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--months 0: want 1 to 24")
	require.Contains(t, errOut, `--min-coverage "1.5": want a share in [0, 1]`)
	require.Contains(t, errOut, `--format "xml"`)
	code, _, errOut = runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", exampleSamples, "--now", "yesterday")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--now: "yesterday": want RFC 3339`)

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	lines, err := os.ReadFile(exampleSamples)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(lines), "\n")
	require.NoError(t, os.WriteFile(bad, []byte(first+"\n"+`{"schema":"cardhour.sample.v1","ts":"nope"}`+"\n"), 0o644))
	code, _, errOut = runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", bad, "--now", "2026-12-01")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "line 2")

	badCat := filepath.Join(t.TempDir(), "cat.yaml")
	require.NoError(t, os.WriteFile(badCat, []byte("currency: CNY\ntimezone: Asia/Shanghai\nskus:\n  - {id: x, gpu_model: T4, profile: full, hourly_price: abc}\n"), 0o644))
	code, _, errOut = runCLI(t, "", "advise", "--catalog", badCat, "--samples", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cat.yaml:4: skus[0].hourly_price")
}

// adviseShareSamples writes hourly samples of HAMi shares of one A100 80GB card
// (no MIG) held by ai101: two 1/20 shares (the example catalog's fixed SKU
// a100-80g-1-20, ¥1.80/h, ¥900/month) all of October 2026, and one 10 %
// share (priced by share: a100-80g-share[mem=10%], ¥0.50/h, ¥250/month)
// from September to November (Asia/Shanghai).
func adviseShareSamples(t *testing.T) string {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	var b []byte
	add := func(pod, profile string, share float64, from, to time.Time) {
		for ts := from; ts.Before(to); ts = ts.Add(time.Hour) {
			s := schemas.Sample{StartMS: ts.UnixMilli(), IntervalMS: 3_600_000, Node: "gpu-node-07", GPUUUID: "GPU-a",
				GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: "GPU-a/share/ai101/" + pod + "/main", Profile: profile,
				ShareKind: schemas.ShareHAMi, ShareMem: share, Project: "ai101", User: "2025010001",
				UtilKnown: true, Util: 0.7, Processes: 1}
			require.NoError(t, s.Validate())
			b = append(s.AppendJSON(b), '\n')
		}
	}
	oct, nov := time.Date(2026, 10, 1, 0, 0, 0, 0, loc), time.Date(2026, 11, 1, 0, 0, 0, 0, loc)
	add("nb-1", "1/20", 0.05, oct, nov)
	add("nb-2", "1/20", 0.05, oct, nov)
	add("train", "mem=10%", 0.10, time.Date(2026, 9, 1, 0, 0, 0, 0, loc), time.Date(2026, 12, 1, 0, 0, 0, 0, loc))
	path := filepath.Join(t.TempDir(), "shares.jsonl")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// Advice on shares of a card, with the example catalog: two month
// reservations of 1/20 shares in October (¥1 800.00 instead of 2 × 744 h ×
// 1.80 = ¥2 678.40) and a year reservation of the 10 % share (3 × 250 × 0.8
// = ¥600.00 instead of 2 184 h × 0.50 = ¥1 092.00).
func TestAdviseShares(t *testing.T) {
	samples := adviseShareSamples(t)
	code, out, errOut := runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", samples, "--now", "2026-12-01", "--project", "ai101", "--format", "json")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Advice []struct {
			Project, SKU, Billed, Advised, Saving string
			Mix                                   struct {
				Year  int64
				Month []int64
			}
			Text map[string]string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	got := map[string]string{}
	for _, a := range rep.Advice {
		got[a.SKU] = a.Billed + " → " + a.Advised + " (saving " + a.Saving + ")"
		switch a.SKU {
		case "a100-80g-1-20":
			require.Equal(t, []int64{0, 2, 0}, a.Mix.Month)
			require.Zero(t, a.Mix.Year)
			require.Contains(t, a.Text["en"], "Month reservations (2 in 2026-10)")
		case "a100-80g-share[mem=10%]":
			require.Equal(t, int64(1), a.Mix.Year)
		}
	}
	require.Equal(t, map[string]string{
		"a100-80g-1-20":           "2678.40 → 1800.00 (saving 878.40)",
		"a100-80g-share[mem=10%]": "1092.00 → 600.00 (saving 492.00)",
	}, got)

	code, out, errOut = runCLI(t, "", "advise", "--catalog", exampleCatalog, "--samples", samples, "--now", "2026-12-01", "--project", "ai101")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "a100-80g-share[mem=10%]")
	require.Contains(t, out, "可节省 ¥878.40")
}
