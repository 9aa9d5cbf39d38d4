package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/ingest/clickhouse"
	"github.com/cardhour/cardhour/internal/testenv"
	"github.com/cardhour/cardhour/schemas"
)

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID      string `json:"refId"`
			RawSQL     string `json:"rawSql"`
			Expr       string `json:"expr"`
			QueryType  string `json:"queryType"`
			Format     *int   `json:"format"`
			EditorType string `json:"editorType"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboard(t *testing.T, name string) *dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "deployments/grafana/dashboards", name))
	require.NoError(t, err)
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	require.NoError(t, dec.Decode(&d), name)
	require.NotEmpty(t, d.UID, name)
	require.NotEmpty(t, d.Panels, name)
	return &d
}

func (d *dashboard) constant(t *testing.T, name string) string {
	for _, v := range d.Templating.List {
		if v.Name == name {
			require.Equal(t, "constant", v.Type, name)
			return v.Query
		}
	}
	t.Fatalf("dashboard %s has no variable %s", d.UID, name)
	return ""
}

// expand turns a panel's SQL into what the grafana-clickhouse-datasource
// plugin sends for the range [from, to): its time macros and the dashboard's
// variables. Anything left starting with $ fails the test.
func (d *dashboard) expand(t *testing.T, sql, db string, from, to time.Time) string {
	t.Helper()
	r := strings.NewReplacer(
		"$__fromTime_ms", fmt.Sprintf("fromUnixTimestamp64Milli(%d)", from.UnixMilli()),
		"$__toTime_ms", fmt.Sprintf("fromUnixTimestamp64Milli(%d)", to.UnixMilli()),
		"$__fromTime", fmt.Sprintf("toDateTime(%d)", from.Unix()),
		"$__toTime", fmt.Sprintf("toDateTime(%d)", to.Unix()),
		"${database}", db,
		"${sku_keys:raw}", d.constant(t, "sku_keys"),
		"${sku_prices:raw}", d.constant(t, "sku_prices"),
	)
	out := r.Replace(sql)
	out = regexp.MustCompile(`\$__timeFilter\((\w+)\)`).ReplaceAllString(out,
		fmt.Sprintf("$1 >= toDateTime(%d) AND $1 <= toDateTime(%d)", from.Unix(), to.Unix()))
	require.NotContains(t, out, "$", "a macro or variable the test does not expand:\n%s", out)
	return out
}

// queryAll runs sql and returns its rows as column name → value.
func queryAll(t *testing.T, st *clickhouse.Store, sql string) []map[string]any {
	t.Helper()
	rows, err := st.Conn().Query(context.Background(), sql)
	require.NoError(t, err, sql)
	defer rows.Close() //nolint:errcheck // read-only
	cols := rows.Columns()
	types := rows.ColumnTypes()
	var out []map[string]any
	for rows.Next() {
		dest := make([]any, len(cols))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		require.NoError(t, rows.Scan(dest...), sql)
		row := map[string]any{}
		for i, c := range cols {
			row[c] = reflect.ValueOf(dest[i]).Elem().Interface()
		}
		out = append(out, row)
	}
	require.NoError(t, rows.Err(), sql)
	return out
}

func num(t *testing.T, v any) decimal.Decimal {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return decimal.NewFromFloat(x)
	case decimal.Decimal:
		return x
	case uint64:
		return decimal.NewFromUint64(x)
	case int64:
		return decimal.NewFromInt(x)
	}
	t.Fatalf("unexpected value %T %v", v, v)
	return decimal.Zero
}

// Every ClickHouse panel of the usage dashboard runs against a real,
// migrated store holding the example usage, and its numbers equal what the
// store's own reads give (Occupancy, IdleRuns) priced with the example
// catalog, so a schema change or a wrong panel fails here.
func TestDashboardSQL(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "dash")
	ctx := context.Background()
	st, err := clickhouse.Open(ctx, clickhouse.Config{Addr: addr, Database: db, Migrate: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS `"+db+"`")
		_ = st.Close()
	})
	data, err := os.ReadFile(filepath.Join(root(t), "schemas/examples/samples.jsonl"))
	require.NoError(t, err)
	var samples []schemas.Sample
	_, err = schemas.ReadSamples(bytes.NewReader(data), schemas.ReadOptions{Workers: 1}, func(_ int, s []schemas.Sample) error {
		samples = append(samples, s...)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, samples)
	// The example usage has no idle time: add a student who leaves a slice
	// idle (util 1 %) for 40 min, then holds it with no reading and no
	// process for 20 min, across the second range's start.
	idleFrom := time.Date(2026, 11, 3, 2, 0, 0, 0, time.UTC).UnixMilli()
	for i := range int64(60) {
		s := schemas.Sample{StartMS: idleFrom + i*60_000, IntervalMS: 60_000, Node: "gpu-node-02", GPUUUID: "GPU-idle",
			GPUModel: "NVIDIA A100-SXM4-80GB", InstanceID: "MIG-idle-1", Profile: "2g.20gb", Project: "ai101", User: "2025010104",
			Util: 0.01, UtilKnown: i < 40, Processes: map[bool]int64{true: 1, false: 0}[i < 40], MemTotal: 1 << 30}
		samples = append(samples, s)
	}
	w, err := ingest.NewWriter(ingest.WriterConfig{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, samples))

	cat, err := schemas.LoadCatalog(filepath.Join(root(t), "schemas/examples/catalog.yaml"))
	require.NoError(t, err)
	d := loadDashboard(t, "cardhour-usage.json")
	// The cost panels' price constants are the example catalog's.
	var keys, prices []string
	for _, s := range cat.SKUs {
		if s.ShareSKU() {
			continue // priced per share profile, not a constant (docs/billing.md, rule 11)
		}
		keys = append(keys, "'"+s.GPUModel+"|"+s.Profile+"'")
		prices = append(prices, "'"+s.HourlyPrice.StringFixed(2)+"'")
	}
	require.Equal(t, strings.Join(keys, ", "), d.constant(t, "sku_keys"))
	require.Equal(t, strings.Join(prices, ", "), d.constant(t, "sku_prices"))

	ranges := [][2]time.Time{
		{time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		// Cuts through runs: the panels clip them.
		{time.Date(2026, 11, 3, 2, 30, 0, 0, time.UTC), time.Date(2026, 11, 4, 3, 7, 0, 0, time.UTC)},
	}
	for _, rg := range ranges {
		from, to := rg[0], rg[1]
		lo, hi := from.UnixMilli(), to.UnixMilli()
		// Expected, from the store's Go reads.
		held := map[string]decimal.Decimal{}  // project → ms
		cost := map[string]decimal.Decimal{}  // project → money
		idle := map[string][2]int64{}         // project → class 1 ms, class 0 ms
		bySKU := map[string]decimal.Decimal{} // model|profile → ms
		require.NoError(t, st.Occupancy(ctx, lo, hi, func(runs []schemas.Run) error {
			for _, r := range runs {
				ms := min(r.EndMS, hi) - max(r.StartMS, lo)
				if ms <= 0 {
					continue
				}
				held[r.Key.Project] = held[r.Key.Project].Add(decimal.NewFromInt(ms))
				bySKU[r.Key.GPUModel+"|"+r.Key.Profile] = bySKU[r.Key.GPUModel+"|"+r.Key.Profile].Add(decimal.NewFromInt(ms))
				price := decimal.Zero
				if sku, ok := cat.ResolveSKU(r.Key.GPUModel, r.Key.Profile); ok {
					price = sku.HourlyPrice
				}
				cost[r.Key.Project] = cost[r.Key.Project].Add(price.Mul(decimal.NewFromInt(ms)).Div(decimal.NewFromInt(3_600_000)))
			}
			return nil
		}))
		require.NotEmpty(t, held, "the example usage is in %s..%s", from, to)
		require.NoError(t, st.IdleRuns(ctx, lo, hi, 0.05, func(runs []schemas.IdleRun) error {
			for _, r := range runs {
				ms := min(r.EndMS, hi) - max(r.StartMS, lo)
				if ms <= 0 || r.Class > 1 {
					continue
				}
				v := idle[r.Key.Project]
				v[1-r.Class] += ms
				idle[r.Key.Project] = v
			}
			return nil
		}))

		hours := func(ms decimal.Decimal) decimal.Decimal { return ms.Div(decimal.NewFromInt(3_600_000)) }
		near := func(what string, want, got decimal.Decimal) {
			t.Helper()
			require.True(t, want.Sub(got).Abs().LessThan(decimal.New(1, -6)), "%s: want %s, got %s", what, want, got)
		}
		ran := 0
		for _, p := range d.Panels {
			require.Len(t, p.Targets, 1, p.Title)
			tg := p.Targets[0]
			require.Equal(t, "grafana-clickhouse-datasource", p.Datasource.Type, p.Title)
			require.Equal(t, "sql", tg.EditorType, p.Title)
			require.NotEmpty(t, tg.RawSQL, p.Title)
			rows := queryAll(t, st, d.expand(t, tg.RawSQL, "`"+db+"`", from, to))
			require.NotEmpty(t, rows, "%s: no rows", p.Title)
			ran++
			sum := func(col string, by func(map[string]any) string) map[string]decimal.Decimal {
				out := map[string]decimal.Decimal{}
				for _, r := range rows {
					out[by(r)] = out[by(r)].Add(num(t, r[col]))
				}
				return out
			}
			project := func(r map[string]any) string { return r["project"].(string) }
			sku := func(r map[string]any) string { return r["gpu_model"].(string) + "|" + r["profile"].(string) }
			switch p.Title {
			case "Held card-hours by project", "Held card-hours by student":
				got := sum("card_hours", project)
				require.Len(t, got, len(held), p.Title)
				for pr, ms := range held {
					near(p.Title+" "+pr, hours(ms), got[pr])
				}
			case "Held card-hours by SKU":
				got := sum("card_hours", sku)
				require.Len(t, got, len(bySKU), p.Title)
				for k, ms := range bySKU {
					near(p.Title+" "+k, hours(ms), got[k])
				}
			case "Held card-hours per day by project":
				require.Equal(t, "timeseries", tg.QueryType)
				got := sum("card_hours", project)
				for pr, ms := range held {
					near(p.Title+" "+pr, hours(ms), got[pr])
				}
				for _, r := range rows {
					tm := r["time"].(time.Time)
					require.True(t, !tm.Before(from.Truncate(24*time.Hour)) && tm.Before(to), "%s: day %s outside the range", p.Title, tm)
				}
			case "On-demand cost estimate by project", "On-demand cost estimate by student", "On-demand cost estimate by SKU":
				by := project
				if p.Title == "On-demand cost estimate by SKU" {
					by = sku
				}
				got := sum("cost", by)
				if p.Title == "On-demand cost estimate by SKU" {
					total := decimal.Zero
					for _, v := range got {
						total = total.Add(v)
					}
					want := decimal.Zero
					for _, v := range cost {
						want = want.Add(v)
					}
					near(p.Title+" total", want, total)
					break
				}
				require.Len(t, got, len(cost), p.Title)
				for pr, c := range cost {
					near(p.Title+" "+pr, c, got[pr])
				}
			case "Idle card-hours by project", "Idle card-hours by student", "Idle card-hours by SKU":
				idleH, noReading := decimal.Zero, decimal.Zero
				for _, r := range rows {
					idleH = idleH.Add(num(t, r["idle_hours"]))
					noReading = noReading.Add(num(t, r["no_reading_hours"]))
				}
				var wantIdle, wantNo int64
				for _, v := range idle {
					wantIdle += v[0]
					wantNo += v[1]
				}
				near(p.Title+" idle", hours(decimal.NewFromInt(wantIdle)), idleH)
				near(p.Title+" no reading", hours(decimal.NewFromInt(wantNo)), noReading)
				if p.Title == "Idle card-hours by project" {
					got := sum("idle_hours", project)
					for pr, v := range idle {
						near(p.Title+" "+pr, hours(decimal.NewFromInt(v[0])), got[pr])
					}
				}
			default:
				t.Errorf("panel %q has no expected values in this test: add them", p.Title)
			}
		}
		require.Equal(t, len(d.Panels), ran)
	}
}

// The pipeline dashboard's Prometheus queries name only metrics the code
// registers.
func TestDashboardMetricsExist(t *testing.T) {
	known := map[string]bool{}
	nameRE := regexp.MustCompile(`Name:\s*"(cardhour_[a-z0-9_]+)"`)
	require.NoError(t, filepath.WalkDir(root(t), func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range nameRE.FindAllStringSubmatch(string(b), -1) {
			known[m[1]] = true
		}
		return nil
	}))
	require.NotEmpty(t, known)
	d := loadDashboard(t, "cardhour-pipeline.json")
	metricRE := regexp.MustCompile(`cardhour_[a-z0-9_]+`)
	var used []string
	for _, p := range d.Panels {
		require.Equal(t, "prometheus", p.Datasource.Type, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			for _, m := range metricRE.FindAllString(tg.Expr, -1) {
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suf); ok && known[b] {
						base = b
					}
				}
				require.True(t, known[base], "panel %q: metric %s is registered nowhere in the code", p.Title, m)
				used = append(used, base)
			}
		}
	}
	sort.Strings(used)
	for _, m := range []string{"cardhour_ingest_consumer_lag_messages", "cardhour_ingest_dlq_messages_total",
		"cardhour_collector_spool_bytes", "cardhour_collector_spool_dropped_records_total",
		"cardhour_watch_leader", "cardhour_watch_releases_total", "cardhour_notify_failed_total"} {
		require.Contains(t, used, m, "the pipeline dashboard shows %s", m)
	}
}
