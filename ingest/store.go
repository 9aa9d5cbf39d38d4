// Package ingest turns a stream of cardhour.sample.v1 samples (Kafka, or a JSON
// Lines file for back-fills) into stored rows that billing can read: raw samples
// for audit and dashboards, and compact occupancy and idle-candidate intervals for
// month closes.
//
// It declares the Store it writes (implementations in ingest/clickhouse and
// ingest/sqlite, an in-memory fake in this package) and the Compactor that turns
// samples into intervals. Billing is a function of the union of intervals, so
// the pipeline is at-least-once everywhere: a replayed or duplicated batch writes
// rows that change nothing downstream.
package ingest

import (
	"context"
	"time"

	"github.com/cardhour/cardhour/schemas"
)

// Batch is what one store write carries: the raw samples and the intervals built
// from them. A store must accept a batch entirely or report an error; writing
// the same batch again (a retry, a replay after a crash) must be harmless.
type Batch struct {
	Samples   []schemas.Sample
	Occupancy []schemas.Run
	Idle      []schemas.IdleRun
	// Latest is the latest held sample of each key whose latest changed (see
	// Compactor.EmitOpen). Stores keep, per instance, the one with the
	// greatest start of all written, so that an older sample written later
	// (a replay, another worker) never replaces a newer one.
	Latest []schemas.Sample
}

// Rows is the number of rows the batch writes.
func (b *Batch) Rows() int { return len(b.Samples) + len(b.Occupancy) + len(b.Idle) + len(b.Latest) }

// Store is where ingest writes. Write must be durable when it returns nil: the
// caller commits Kafka offsets right after.
type Store interface {
	Write(ctx context.Context, b *Batch) error
	Close() error
}

// RawStreamer is implemented by stores that can take a batch's raw samples in
// pieces while the batch is still being read, within one insert that is
// acknowledged only at its end: the store works on the first samples while the
// rest are fetched and decoded, and holds one piece, not the batch, in its
// insert buffers. Writer uses it when the store has it.
type RawStreamer interface {
	BeginRaw(ctx context.Context) (RawStream, error)
}

// RawStream is one open insert of raw samples. Nothing of it may be assumed
// stored until Finish returns nil; Abort (or a failed Append or Finish) discards
// it, after which the caller writes the batch again through Store.Write.
type RawStream interface {
	// Append sends samples (the caller may reuse them once it returns).
	Append(samples []schemas.Sample) error
	// Finish ends the insert; nil means the store accepted every sample appended.
	Finish() error
	// Abort discards the insert; safe after a failure and after Finish.
	Abort()
}

// Reject is one input line or message that ingest did not store: a line a
// back-fill found invalid, or a dead letter of the Kafka worker. Stores keep
// them so that billing can say a period has rejected input.
type Reject struct {
	// TimeMS is the sample's own time when its ts could be read, else the
	// time it was rejected.
	TimeMS int64
	// Source is the rejected input's position, its identity: a replay of the
	// same input writes the same Source, and readers count distinct sources.
	// kafka:TOPIC/PARTITION/OFFSET (#LINE for a line of a message) or
	// file:PATH:LINE.
	Source string
	Reason schemas.RejectReason // as Reason classifies the error
	Error  string               // the decoder's message
}

// RejectSummary is what a store holds about the rejects of a time range.
type RejectSummary struct {
	Count int64    // distinct sources
	First []Reject // the earliest few, by time then source
}

// Rejects is implemented by every Backend: rejects are written (repeating one
// is harmless) and summed up per time range [fromMS, toMS).
type Rejects interface {
	WriteRejects(ctx context.Context, rs []Reject) error
	RejectSummary(ctx context.Context, fromMS, toMS int64, first int) (RejectSummary, error)
}

// Backend is a store that billing can also read from. Its read methods are
// those of reads.UsageSource (invoices), reads.UsageRows (usage),
// reads.HeldRows and reads.LatestRows (held now) and reads.QualityRows
// (data quality): a store only fetches rows, billing owns every read
// algorithm. They are spelled here over the stored row types so that ingest
// does not depend on billing.
type Backend interface {
	Store
	Rejects
	Occupancy(ctx context.Context, lo, hi int64, fn func([]schemas.Run) error) error
	IdleRuns(ctx context.Context, from, to int64, maxUtil float64, fn func([]schemas.IdleRun) error) error
	RawIdle(ctx context.Context, instances []string, from, to int64, utilBelow float64, fn func([]schemas.RawPoint) error) error
	UsageRows(ctx context.Context, q schemas.UsageRowQuery, fn func(schemas.UsageRow) error) error
	HeldSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error
	LatestSamples(ctx context.Context, fromMS int64, fn func(*schemas.Sample) error) error
	Rejects(ctx context.Context, fromMS, toMS int64, first int) (int64, []schemas.RejectRow, error)
	NodeBuckets(ctx context.Context, fromMS, toMS, bucketMS int64, fn func(schemas.NodeBucketRow) error) error
	Unattributed(ctx context.Context, fromMS, toMS int64, minUtil float64, fn func(schemas.UnattributedUsage) error) error
}

// HourlySums is implemented by stores that keep sums per hour of their raw
// samples for the efficiency reads (ingest/clickhouse: util_hours), which the
// writing process refreshes: now and then while it runs, and once a
// back-fill ends. A store answers every read without them (from its raw
// samples); they only make long ranges fast.
type HourlySums interface {
	RefreshHourlySums(ctx context.Context) (SumsRefresh, error)
}

// SumsRefresh is what one RefreshHourlySums did.
type SumsRefresh struct {
	Hours int           // hours computed
	Rows  int           // rows written
	Took  time.Duration // wall time
}

// SampleSource is a store whose raw samples can be read back whole, every
// field and the unheld ones too: what `cardhour ingest --from-store` copies
// into another store (a SQLite store outgrown, one server's ClickHouse
// database moving to a cluster). SampleSpan is the first and last sample
// start (ok false when there is none); AllSamples hands every sample that
// starts in [fromMS, toMS) to fn, replays collapsed, in no set order.
type SampleSource interface {
	SampleSpan(ctx context.Context) (firstMS, lastMS int64, ok bool, err error)
	AllSamples(ctx context.Context, fromMS, toMS int64, fn func(*schemas.Sample) error) error
}
