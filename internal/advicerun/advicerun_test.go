package advicerun

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/billing/advice"
	"github.com/cardhour/cardhour/internal/gen"
	"github.com/cardhour/cardhour/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fleet bills a generated fleet of instances over the three months before
// 2026-12-01, samples spread evenly over them, as the advice takes it.
func fleet(tb testing.TB, instances, samples int64, seed uint64) (*schemas.Catalog, time.Time, []*billing.Result) {
	tb.Helper()
	cat, err := schemas.LoadCatalog("../../schemas/examples/catalog.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, cat.Location)
	periods := advice.Window(cat, now, 3)
	accs := make([]*billing.Accumulator, len(periods))
	for i, p := range periods {
		accs[i] = billing.NewAccumulator(cat, p)
	}
	from, to := periods[0].StartMS(), periods[2].EndMS()
	_, err = gen.Each(gen.Config{Samples: samples, StartMS: from, IntervalMS: (to - from) / (samples / instances) / 1000 * 1000,
		Instances: int(instances), Seed: seed}, func(s *schemas.Sample) error {
		for _, a := range accs {
			a.Add(s)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	results := make([]*billing.Result, len(accs))
	for i, a := range accs {
		results[i] = a.Invoices()
	}
	return cat, now, results
}

func jsonOf(t *testing.T, rep *advice.Report) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, advice.WriteJSON(&b, rep))
	return b.String()
}

// The months billed at once and the pairs priced on workers give the report
// billing/advice gives one pair after the other, byte for byte; the progress
// lines say what was done.
func TestAdviseOnWorkersIsThePureAdvice(t *testing.T) {
	cat, now, results := fleet(t, 60, 60_000, 3)
	opt := advice.Options{Now: now, MinCoverage: advice.DefaultMinCoverage}
	pure, err := advice.Advise(cat, opt, results)
	require.NoError(t, err)
	require.NotEmpty(t, pure.Advice)
	want := jsonOf(t, pure)
	for _, workers := range []int{1, 4} {
		var mu sync.Mutex
		var lines []string
		cfg := Config{Workers: workers, Progress: func(msg string) { mu.Lock(); lines = append(lines, msg); mu.Unlock() }}
		rep, err := Advise(context.Background(), cat, FromResults(results), opt, cfg)
		require.NoError(t, err)
		require.Equal(t, want, jsonOf(t, rep), "%d workers", workers)
		text := strings.Join(lines, "\n")
		for _, p := range advice.Window(cat, now, 3) {
			require.Contains(t, text, "billed "+p.String()+" (")
		}
		require.Contains(t, text, "pricing ")
		require.Regexp(t, `priced \d+ pairs in .* \([1-9]\d* bills of one month by the engine\)`, text)
	}
}

// A month that cannot be billed fails the advice, naming the month; so does
// a cancelled context; zero Now is the current time.
func TestAdviseErrors(t *testing.T) {
	cat, now, results := fleet(t, 60, 60_000, 3)
	opt := advice.Options{Now: now, MinCoverage: advice.DefaultMinCoverage}
	boom := errors.New("store gone")
	failing := func(ctx context.Context, p billing.Period) (*billing.Result, error) {
		if p.Month == time.October {
			return nil, boom
		}
		return FromResults(results)(ctx, p)
	}
	_, err := Advise(context.Background(), cat, failing, opt, Config{})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "cannot bill 2026-10: store gone")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Advise(ctx, cat, FromResults(results), opt, Config{Workers: 2})
	require.ErrorIs(t, err, context.Canceled)

	_, err = Advise(context.Background(), cat, FromResults(nil), advice.Options{MinCoverage: advice.DefaultMinCoverage}, Config{})
	require.ErrorContains(t, err, "cannot bill "+advice.Window(cat, time.Now(), 3)[0].String())
}
