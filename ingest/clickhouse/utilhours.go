package clickhouse

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// The efficiency reads' hourly sums (migrations 0020–0022). UtilRows sums
// every sample of a range, held or not, by node, GPU model and bucket: over a
// month of a large fleet, raw_samples FINAL is tens of millions of rows. The
// writer keeps util_hours, the same sums per node, model and UTC hour of the
// hours that have ended, computed from raw_samples FINAL (RefreshHourlySums),
// and marks in sample_hours every hour a batch wrote to, after the batch's
// raw insert was acknowledged. A read uses an hour's sums when a computation
// of it is complete (its marker row) and no sample of the hour was written
// since that computation started; every other part of the range is read from
// the raw samples, as before. So a read answers what the raw samples answer,
// whatever was replayed or written late.

// hourMS is the bucket of util_hours and sample_hours.
const hourMS = int64(time.Hour / time.Millisecond)

// Refresh settings: an hour is computed once UtilSettle has passed since its
// end (later samples of it are rare and only make it stale again); an hour is
// fresh only when its last mark is older than its computation by more than
// Config.ClockSkew (the servers' clocks, in seconds).
const (
	UtilSettle       = 10 * time.Minute
	defaultClockSkew = 5 * time.Second
	// refreshSpan is the most hours one computation reads (a month: the
	// raw samples' partition, which a read of any of its hours reads).
	refreshSpan = 31 * 24
)

// writerName names this process in sample_hours.
var writerName = func() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}()

// hourOf is the UTC hour bucket of a time in ms.
func hourOf(ms int64) int64 { return ms - ((ms%hourMS)+hourMS)%hourMS }

// hoursOf are the distinct hours of the samples, in the order first seen.
func hoursOf(samples []schemas.Sample) []int64 {
	var out []int64
	for i := range samples {
		h := hourOf(samples[i].StartMS)
		if len(out) == 0 || (out[len(out)-1] != h && !slices.Contains(out, h)) {
			out = append(out, h)
		}
	}
	return out
}

// hoursOfActivity are the distinct hours of a batch's node minutes.
func hoursOfActivity(a *ingest.Activity) []int64 {
	var out []int64
	for _, m := range a.Nodes {
		h := hourOf(m.MinuteMS)
		if len(out) == 0 || (out[len(out)-1] != h && !slices.Contains(out, h)) {
			out = append(out, h)
		}
	}
	return out
}

// markHours records that samples of hours were written (after their raw
// insert was acknowledged): each becomes stale in util_hours.
func (s *Store) markHours(ctx context.Context, hours []int64) error {
	n := len(hours)
	if n == 0 {
		return nil
	}
	ts, writer := make([]time.Time, n), make([]string, n)
	for i, h := range hours {
		ts[i], writer[i] = dateTime(h), writerName
	}
	return s.insert(ctx, "sample_hours", "ts, bucket_ms, writer", n, ts, hours, writer)
}

// hourState is what a read or a refresh knows of one hour.
type hourState struct {
	written   int64  // max(written_at) of its marks, unix seconds (0: no mark)
	computeID uint64 // its newest complete computation (0: none)
}

// fresh reports whether the hour's computation holds every sample written,
// the clocks differing by at most skew seconds.
func (h hourState) fresh(skew int64) bool {
	return h.computeID != 0 && (h.written == 0 || h.written < int64(h.computeID>>32)-skew)
}

// skew is Config.ClockSkew in seconds.
func (s *Store) skew() int64 {
	switch {
	case s.cfg.ClockSkew == 0:
		return int64(defaultClockSkew / time.Second)
	case s.cfg.ClockSkew < 0:
		return 0
	}
	return int64(s.cfg.ClockSkew / time.Second)
}

// HourlySumsState counts the hours of [fromMS, toMS) a read would take from
// the hourly sums (fresh) and those it would read from the raw samples
// (stale: written since their last computation, or never computed).
func (s *Store) HourlySumsState(ctx context.Context, fromMS, toMS int64) (fresh, stale int, err error) {
	states, err := s.hourStates(ctx, hourOf(fromMS), toMS)
	if err != nil {
		return 0, 0, err
	}
	for _, st := range states {
		switch {
		case st.fresh(s.skew()):
			fresh++
		case st.written != 0:
			stale++
		}
	}
	return fresh, stale, nil
}

// hourStates reads the marks and the complete computations of the hours in
// [lo, hi) (every hour when hi is 0), both at once.
func (s *Store) hourStates(ctx context.Context, lo, hi int64) (map[int64]hourState, error) {
	where := ""
	if hi > 0 {
		where = " AND bucket_ms >= " + itoa(lo) + " AND bucket_ms < " + itoa(hi)
	}
	marks := make(chan error, 1)
	written := map[int64]int64{}
	go func() {
		marks <- s.scanPairs(ctx, "SELECT bucket_ms, toUInt64(max(written_at)) FROM "+s.table("sample_hours")+
			" WHERE 1 = 1"+where+" GROUP BY bucket_ms", func(b int64, v uint64) { written[b] = int64(v) })
	}()
	out := map[int64]hourState{}
	err := s.scanPairs(ctx, "SELECT bucket_ms, max(compute_id) FROM "+s.table("util_hours")+
		" WHERE marker = 1"+where+" GROUP BY bucket_ms", func(b int64, v uint64) { out[b] = hourState{computeID: v} })
	if merr := <-marks; err == nil {
		err = merr
	}
	if err != nil {
		return nil, classify(fmt.Errorf("cannot read the state of the hourly sums: %w", err))
	}
	for b, w := range written {
		st := out[b]
		st.written = w
		out[b] = st
	}
	return out, nil
}

// scanPairs runs a query of (Int64, UInt64) rows.
func (s *Store) scanPairs(ctx context.Context, q string, fn func(int64, uint64)) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var b int64
		var v uint64
		if err := rows.Scan(&b, &v); err != nil {
			return err
		}
		fn(b, v)
	}
	return rows.Err()
}

// RefreshHourlySums implements ingest.HourlySums: it computes the hourly sums of every stale hour that ended
// at least UtilSettle before now (the server's clock): the hours with samples
// written since their last computation, or never computed. Each run of
// consecutive stale hours of one month is one read of raw_samples FINAL,
// inserted as it is read; its markers follow once its rows were accepted.
// When one of those hours was written within the clock skew (a back-fill
// that just ended), it first waits the skew out, so that the computation
// counts as newer than every mark.
func (s *Store) RefreshHourlySums(ctx context.Context) (ingest.SumsRefresh, error) {
	began := time.Now()
	var res ingest.SumsRefresh
	now, stale, recent, err := s.staleHours(ctx)
	if err == nil && recent {
		// Hours written within the clock skew: a computation begun now would
		// count as older than their marks and stay stale (the end of a
		// back-fill). Waiting the skew out lets it count.
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Duration(s.skew()+1) * time.Second):
		}
		now, stale, _, err = s.staleHours(ctx)
	}
	if err != nil {
		return res, err
	}
	id := uint64(now)<<32 | uint64(rand.Uint32())
	for _, span := range hourRuns(stale, refreshSpan, true) {
		n, err := s.computeHours(ctx, id, span[0], span[1])
		if err != nil {
			return res, err
		}
		res.Hours += int((span[1] - span[0]) / hourMS)
		res.Rows += n
	}
	res.Took = time.Since(began)
	return res, nil
}

// staleHours are the hours a refresh at the server's time now computes, in
// order; recent reports whether one of them was written within the clock
// skew of now.
func (s *Store) staleHours(ctx context.Context) (now uint32, stale []int64, recent bool, err error) {
	if err := s.conn.QueryRow(ctx, "SELECT toUInt32(now())").Scan(&now); err != nil {
		return 0, nil, false, classify(fmt.Errorf("cannot read the server's clock: %w", err))
	}
	states, err := s.hourStates(ctx, 0, 0)
	if err != nil {
		return 0, nil, false, err
	}
	limit := int64(now)*1000 - UtilSettle.Milliseconds()
	for b, st := range states {
		if st.written != 0 && !st.fresh(s.skew()) && b+hourMS <= limit {
			stale = append(stale, b)
			recent = recent || st.written >= int64(now)-s.skew()
		}
	}
	slices.Sort(stale)
	return now, stale, recent, nil
}

// hourRuns splits sorted hours into runs [lo, hi) of consecutive hours, at
// most max hours each, and, when byMonth, each within one UTC month (one
// partition of raw_samples: a computation reads it once).
func hourRuns(hours []int64, max int, byMonth bool) [][2]int64 {
	var out [][2]int64
	for _, h := range hours {
		if n := len(out); n > 0 && out[n-1][1] == h && (h-out[n-1][0])/hourMS < int64(max) &&
			(!byMonth || ingest.MonthStartMS(h) == ingest.MonthStartMS(out[n-1][0])) {
			out[n-1][1] = h + hourMS
			continue
		}
		out = append(out, [2]int64{h, h + hourMS})
	}
	return out
}

// computeHours writes computation id of the hours [lo, hi): the sums of each
// node, model and hour, inserted as they are read (utilChunk rows at a
// time), then a marker per hour. It returns the rows written.
func (s *Store) computeHours(ctx context.Context, id uint64, lo, hi int64) (int, error) {
	q := schemas.UtilRowQuery{FromMS: lo, ToMS: hi, ByNode: true, BucketMS: hourMS}
	d := ingest.Dialect{Samples: s.samples(lo, hi), Zero: "toInt64(0)", UtilOrZero: "ifNull(util, toFloat64(0))"}
	var c utilCols
	rows := 0
	flush := func() error {
		if len(c.bucket) == 0 {
			return nil
		}
		err := s.insert(ctx, "util_hours", utilColumns, len(c.bucket), c.columns()...)
		rows += len(c.bucket)
		c.reset()
		return err
	}
	err := s.scanUtil(ctx, ingest.UtilSQL(d, q), func(r schemas.UtilRow) error {
		if c.add(id, 0, r); len(c.bucket) == utilChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return 0, err
	}
	for h := lo; h < hi; h += hourMS {
		c.add(id, 1, schemas.UtilRow{BucketMS: h})
	}
	return rows + len(c.bucket), flush()
}

// utilChunk is the most rows of one util_hours insert of a computation.
const utilChunk = 1 << 16

const utilColumns = "ts, bucket_ms, compute_id, marker, node, gpu_model, seen_ms, held_ms, measured_ms, held_unmeasured_ms, util_ms"

// utilCols are the columns of one util_hours insert.
type utilCols struct {
	ts                                    []time.Time
	bucket, seen, held, measured, heldUnm []int64
	id                                    []uint64
	marker                                []uint8
	node, model                           []string
	util                                  []float64
}

func (c *utilCols) add(id uint64, marker uint8, r schemas.UtilRow) {
	c.ts, c.bucket, c.id, c.marker = append(c.ts, dateTime(r.BucketMS)), append(c.bucket, r.BucketMS), append(c.id, id), append(c.marker, marker)
	c.node, c.model = append(c.node, r.Node), append(c.model, r.GPUModel)
	c.seen, c.held, c.measured, c.heldUnm = append(c.seen, r.SeenMS), append(c.held, r.HeldMS), append(c.measured, r.MeasuredMS), append(c.heldUnm, r.HeldUnmeasuredMS)
	c.util = append(c.util, r.UtilMS)
}

func (c *utilCols) reset() {
	clear(c.node)
	clear(c.model)
	c.ts, c.bucket, c.id, c.marker = c.ts[:0], c.bucket[:0], c.id[:0], c.marker[:0]
	c.node, c.model, c.seen, c.held, c.measured, c.heldUnm, c.util = c.node[:0], c.model[:0], c.seen[:0], c.held[:0], c.measured[:0], c.heldUnm[:0], c.util[:0]
}

func (c *utilCols) columns() []any {
	return []any{c.ts, c.bucket, c.id, c.marker, c.node, c.model, c.seen, c.held, c.measured, c.heldUnm, c.util}
}

// scanUtil runs a query of UtilRow columns, handing each row to fn.
func (s *Store) scanUtil(ctx context.Context, query string, fn func(schemas.UtilRow) error) error {
	rows, err := s.conn.Query(ctx, query)
	if err != nil {
		return classify(fmt.Errorf("cannot read utilisation: %w", err))
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var r schemas.UtilRow
		if err := rows.Scan(&r.Node, &r.GPUModel, &r.BucketMS, &r.SeenMS, &r.HeldMS, &r.MeasuredMS, &r.HeldUnmeasuredMS, &r.UtilMS); err != nil {
			return fmt.Errorf("cannot read utilisation row: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// utilPlan is how a read answers a query: the hours util_hours answers
// (hour → computation) and the ranges the raw samples answer.
type utilPlan struct {
	fresh map[int64]uint64
	raw   [][2]int64
}

// planUtil splits q's range: its whole UTC hours whose sums are fresh come
// from util_hours, the rest from the raw samples. ok is false when the sums
// cannot answer q at all (a bucket that is not whole hours).
func (s *Store) planUtil(ctx context.Context, q schemas.UtilRowQuery) (p utilPlan, ok bool, err error) {
	if q.BucketMS < 0 || q.BucketMS%hourMS != 0 || q.FromMS < 0 {
		return p, false, nil
	}
	lo, hi := hourOf(q.FromMS+hourMS-1), hourOf(q.ToMS)
	if lo >= hi {
		return p, false, nil
	}
	states, err := s.hourStates(ctx, lo, hi)
	if err != nil {
		return p, false, err
	}
	p.fresh = map[int64]uint64{}
	var stale []int64
	for b, st := range states {
		switch {
		case st.fresh(s.skew()):
			p.fresh[b] = st.computeID
		case st.written != 0:
			stale = append(stale, b)
		}
	}
	slices.Sort(stale)
	if q.FromMS < lo {
		p.raw = append(p.raw, [2]int64{q.FromMS, lo})
	}
	p.raw = append(p.raw, hourRuns(stale, 31*24, false)...)
	if hi < q.ToMS {
		p.raw = append(p.raw, [2]int64{hi, q.ToMS})
	}
	return p, true, nil
}

// sql is the plan's one query: the fresh hours' sums and the raw ranges'
// sums, grouped as q asks (UtilSQL's columns).
func (p utilPlan) sql(s *Store, q schemas.UtilRowQuery, groups map[string]string) string {
	node, model, only := "''", "''", ""
	if !q.AllModels {
		model = "gpu_model"
	}
	if q.ByNode {
		node = "node"
	}
	if groups != nil {
		node, only = groupExpr(groups)
	}
	bucket := func(col string) string { return "toInt64(0)" }
	if q.BucketMS > 0 {
		b := "toInt64(" + itoa(q.BucketMS) + ")"
		bucket = func(col string) string { return "(" + col + " - " + col + " % " + b + ")" }
	}
	// Every part and the whole group by all three (a constant one groups
	// nothing), as 18.16 wants each column grouped or aggregated.
	const groupBy = " GROUP BY u_node, u_model, u_bucket"
	head := func(col string) string {
		return "SELECT " + node + " AS u_node, " + model + " AS u_model, " + bucket(col) + " AS u_bucket, "
	}
	var parts []string
	if len(p.fresh) > 0 {
		pairs := make([]string, 0, len(p.fresh))
		for b, id := range p.fresh {
			pairs = append(pairs, "("+itoa(b)+", "+strconv.FormatUint(id, 10)+")")
		}
		slices.Sort(pairs)
		parts = append(parts, head("bucket_ms")+"sum(seen_ms) AS u_seen, sum(held_ms) AS u_held, sum(measured_ms) AS u_measured, "+
			"sum(held_unmeasured_ms) AS u_unmeasured, sum(util_ms) AS u_util FROM "+s.table("util_hours")+
			" WHERE marker = 0 AND (bucket_ms, compute_id) IN ("+strings.Join(pairs, ", ")+")"+only+groupBy)
	}
	for _, r := range p.raw {
		parts = append(parts, head("start_ms")+"sum(interval_ms) AS u_seen"+
			", sum(CASE WHEN project != '' THEN interval_ms ELSE toInt64(0) END) AS u_held"+
			", sum(CASE WHEN util IS NOT NULL THEN interval_ms ELSE toInt64(0) END) AS u_measured"+
			", sum(CASE WHEN project != '' AND util IS NULL THEN interval_ms ELSE toInt64(0) END) AS u_unmeasured"+
			", sum(ifNull(util, toFloat64(0)) * interval_ms) AS u_util FROM "+s.samples(r[0], r[1])+
			" WHERE start_ms >= "+itoa(r[0])+" AND start_ms < "+itoa(r[1])+only+groupBy)
	}
	if len(parts) == 0 {
		return ""
	}
	return "SELECT u_node, u_model, u_bucket, sum(u_seen), sum(u_held), sum(u_measured), sum(u_unmeasured), sum(u_util) FROM (" +
		strings.Join(parts, " UNION ALL ") + ")" + groupBy
}

// groupExpr is the SQL naming each node of groups by its group (node → the
// group's name), and the condition keeping only those nodes.
func groupExpr(groups map[string]string) (expr, only string) {
	nodes := make([]string, 0, len(groups))
	for n := range groups {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	from, to := make([]string, len(nodes)), make([]string, len(nodes))
	for i, n := range nodes {
		from[i], to[i] = quote(n), quote(groups[n])
	}
	list := "[" + strings.Join(from, ", ") + "]"
	return "transform(toString(node), " + list + ", [" + strings.Join(to, ", ") + "], '')",
		" AND toString(node) IN (" + strings.Join(from, ", ") + ")"
}

// UtilGroupRows implements reads.UtilGroupRows: UtilRows by node (q.ByNode),
// each node of groups summed into its group (Node: the group's name), the
// nodes not in groups left out, in the database.
func (s *Store) UtilGroupRows(ctx context.Context, q schemas.UtilRowQuery, groups map[string]string, fn func(schemas.UtilRow) error) error {
	if len(groups) == 0 {
		return nil
	}
	q.ByNode = true
	p, ok, err := s.planUtil(ctx, q)
	if err != nil {
		return err
	}
	if !ok {
		p = utilPlan{raw: [][2]int64{{q.FromMS, q.ToMS}}}
	}
	query := p.sql(s, q, groups)
	if query == "" {
		return nil
	}
	return s.scanUtil(ctx, query, fn)
}
