package reads

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/schemas"
)

// SilentGap is the longest a node may send no sample before the data-quality
// check reports it silent: nodes sample every few seconds, so ten minutes
// without one means a collector or its node stopped. Gaps are measured on
// NodeBucket buckets, so a reported gap is at least SilentGap and a gap is
// missed only when shorter than SilentGap + NodeBucket.
const (
	SilentGap  = 10 * time.Minute
	NodeBucket = time.Minute
)

// firstRejects is how many rejects DataQuality lists.
const firstRejects = 5

// DataQuality is what may be wrong with the stored usage of a period. It is
// per node and instance and names no holder (students see their project's
// invoice warnings, never another student's data).
type DataQuality struct {
	Period    string    `json:"period"`
	CheckedAt time.Time `json:"checked_at"`
	// Rejected input (lines or messages ingest did not store) with its time
	// in the period: distinct sources, and the earliest few.
	Rejected      int64               `json:"rejected"`
	FirstRejected []schemas.RejectRow `json:"first_rejected"`
	// Silent nodes: nodes with samples in the period that stopped before
	// min(now, period end), or had a gap over SilentGap.
	Silent []SilentNode `json:"silent"`
	// Unattributed busy usage: samples with no holder but processes or util
	// at or above the default idle threshold, per node and instance; such
	// usage is billed to nobody.
	Unattributed []schemas.UnattributedUsage `json:"unattributed"`
	// Unpriced usage is reported by the invoices themselves
	// (Result.Warnings with WarnUnpriced, Invoice unpriced lines).
}

// SilentNode is one gap in a node's samples (Until zero when it never
// resumed before the end of the check).
type SilentNode struct {
	Node  string
	From  time.Time // end of the last sample bucket before the gap
	Until time.Time // start of the first bucket after it; zero: still silent
}

// MarshalJSON writes until as null while the node is still silent. A run
// reports every gap (thousands when samples are sparse), so the common case
// (a node name of plain ASCII, years 0 to 9999) is written directly; the
// rest by the encoder, with the same bytes.
func (n SilentNode) MarshalJSON() ([]byte, error) {
	if b, ok := n.appendJSON(make([]byte, 0, 96)); ok {
		return b, nil
	}
	return n.marshalJSON()
}

// marshalJSON is MarshalJSON by the encoder.
func (n SilentNode) marshalJSON() ([]byte, error) {
	var until *time.Time
	if !n.Until.IsZero() {
		until = &n.Until
	}
	return MarshalNoEscape(struct {
		Node  string     `json:"node"`
		From  time.Time  `json:"from"`
		Until *time.Time `json:"until"`
	}{n.Node, n.From, until})
}

// appendJSON appends what marshalJSON writes; false when n needs the
// encoder (a character JSON escapes, a year time.Time refuses).
func (n SilentNode) appendJSON(b []byte) ([]byte, bool) {
	for i := 0; i < len(n.Node); i++ {
		if c := n.Node[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return nil, false
		}
	}
	plainYear := func(t time.Time) bool { return t.Year() >= 0 && t.Year() <= 9999 }
	if !plainYear(n.From) || (!n.Until.IsZero() && !plainYear(n.Until)) {
		return nil, false
	}
	b = append(append(append(b, `{"node":"`...), n.Node...), `","from":"`...)
	b = append(n.From.AppendFormat(b, time.RFC3339Nano), `","until":`...)
	if n.Until.IsZero() {
		return append(b, "null}"...), true
	}
	b = append(n.Until.AppendFormat(append(b, '"'), time.RFC3339Nano), `"}`...)
	return b, true
}

// QualityRows is a store that can answer the data-quality check.
// Implemented by ingest.MemStore, ingest/sqlite and ingest/clickhouse, from
// the rollup they write with the samples (ingest.Activity: node minutes and
// busy unheld samples), not from a scan of the raw samples.
type QualityRows interface {
	// Rejects counts distinct rejected sources with time in [fromMS, toMS)
	// and returns the earliest first of them.
	Rejects(ctx context.Context, fromMS, toMS int64, first int) (int64, []schemas.RejectRow, error)
	// NodeBuckets returns each (node, bucket of bucketMS, UTC-aligned) with
	// at least one sample starting in [fromMS, toMS), in any order, at least
	// once (a bucket cut by the range's ends may come twice).
	NodeBuckets(ctx context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error
	// Unattributed sums the intervals of samples with an empty project and
	// processes > 0 or util >= minUtil starting in [fromMS, toMS), per node
	// and instance (Seconds in milliseconds), each (node, instance) once.
	Unattributed(ctx context.Context, fromMS, toMS int64, minUtil float64, fn func(schemas.UnattributedUsage) error) error
}

// CheckDataQuality checks the stored usage of period p up to now.
func CheckDataQuality(ctx context.Context, src QualityRows, cat *schemas.Catalog, p billing.Period, now time.Time) (*DataQuality, error) {
	from, to := p.StartMS(), min(p.EndMS(), now.UnixMilli())
	dq := &DataQuality{Period: p.String(), CheckedAt: now.UTC()}
	if to <= from {
		return dq, nil
	}
	var err error
	if dq.Rejected, dq.FirstRejected, err = src.Rejects(ctx, from, p.EndMS(), firstRejects); err != nil {
		return nil, fmt.Errorf("data quality: rejects: %w", err)
	}
	bucket := NodeBucket.Milliseconds()
	nodes := map[string][]int64{}
	if err := src.NodeBuckets(ctx, from, to, bucket, func(r schemas.NodeBucketRow) error {
		nodes[r.Node] = append(nodes[r.Node], r.BucketMS)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("data quality: node activity: %w", err)
	}
	gap := SilentGap.Milliseconds()
	for node, bs := range nodes {
		slices.Sort(bs)
		bs = slices.Compact(bs)
		for i := 1; i < len(bs); i++ {
			if bs[i]-(bs[i-1]+bucket) >= gap {
				dq.Silent = append(dq.Silent, SilentNode{Node: node, From: time.UnixMilli(bs[i-1] + bucket).UTC(), Until: time.UnixMilli(bs[i]).UTC()})
			}
		}
		if end := bs[len(bs)-1] + bucket; to-end >= gap {
			dq.Silent = append(dq.Silent, SilentNode{Node: node, From: time.UnixMilli(end).UTC()})
		}
	}
	slices.SortFunc(dq.Silent, func(a, b SilentNode) int { return cmp.Or(cmp.Compare(a.Node, b.Node), a.From.Compare(b.From)) })
	if err := src.Unattributed(ctx, from, to, cat.Defaults.Idle.Threshold, func(u schemas.UnattributedUsage) error {
		u.Seconds /= 1000
		if u.Seconds > 0 {
			dq.Unattributed = append(dq.Unattributed, u)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("data quality: unattributed usage: %w", err)
	}
	slices.SortFunc(dq.Unattributed, func(a, b schemas.UnattributedUsage) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return dq, nil
}
