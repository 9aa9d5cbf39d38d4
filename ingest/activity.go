package ingest

import (
	"github.com/cardhour/cardhour/schemas"
)

// ActivityMinuteMS is the bucket of the node activity rollup: a store keeps
// one row per node and UTC minute in which a sample of the node starts
// (start_ms - start_ms % ActivityMinuteMS), written with the samples.
const ActivityMinuteMS = 60_000

// NodeMinute says that a sample of Node starts in the minute at MinuteMS.
type NodeMinute struct {
	Node     string
	MinuteMS int64
}

// Activity is the data-quality rollup of samples, written by every store
// with the samples (in the same transaction where the store has them), so
// that reads.CheckDataQuality reads no raw sample:
//
//   - Nodes, each (node, minute) with a sample, once: a replay adds no row
//     (stores keep each row once: INSERT OR IGNORE, ReplacingMergeTree
//     collapsed by GROUP BY);
//   - Unheld, the unheld samples that some idle threshold above 0 calls busy
//     (UnheldBusy): few (usage nobody holds), kept whole with the raw
//     sample's identity, so that a replay replaces its row like the raw
//     sample's and any threshold above 0 is answered exactly.
//
// A threshold of 0 calls every unheld sample of known util busy: stores
// answer it from the raw samples.
type Activity struct {
	Nodes  []NodeMinute
	Unheld []schemas.Sample
	seen   map[NodeMinute]struct{}
	last   NodeMinute // the pair of the last sample added (in seen)
}

// UnheldBusy reports whether s is an unheld sample that the data-quality
// check counts as unattributed usage under some threshold above 0: it has
// processes, or a util above 0.
func UnheldBusy(s *schemas.Sample) bool {
	return s.Project == "" && (s.Processes > 0 || (s.UtilKnown && s.Util > 0))
}

// MinuteOf is the activity minute of a sample starting at startMS.
func MinuteOf(startMS int64) int64 { return startMS - startMS%ActivityMinuteMS }

// ActivityOf is the rollup of samples.
func ActivityOf(samples []schemas.Sample) *Activity {
	a := &Activity{}
	a.Add(samples)
	return a
}

// Add folds samples into the rollup (a piece of a streamed batch).
func (a *Activity) Add(samples []schemas.Sample) {
	if a.seen == nil {
		a.seen = map[NodeMinute]struct{}{}
	}
	for i := range samples {
		s := &samples[i]
		m := NodeMinute{Node: s.Node, MinuteMS: MinuteOf(s.StartMS)}
		// Samples come in runs of one node and tick (a message): only the
		// first of a run looks the pair up.
		if m != a.last || len(a.Nodes) == 0 {
			a.last = m
			if _, ok := a.seen[m]; !ok {
				a.seen[m] = struct{}{}
				a.Nodes = append(a.Nodes, m)
			}
		}
		if UnheldBusy(s) {
			a.Unheld = append(a.Unheld, *s)
		}
	}
}

// Seal drops the lookup table of the pairs seen, once no more samples come
// (the rows stay): a streamed batch's rollup waits for its insert to end while
// the next batch's grows. Samples added after Seal may list a pair again, which
// the stores absorb like a replay.
func (a *Activity) Seal() { a.seen = nil }

// Empty reports whether the rollup has no row to write.
func (a *Activity) Empty() bool { return len(a.Nodes) == 0 && len(a.Unheld) == 0 }

// MinuteSpan splits [fromMS, toMS) for a read of the node activity in
// buckets of bucketMS: the whole minutes [lo, hi) are answered by the rollup
// and the rest, [fromMS, lo) and [hi, toMS) (less than a minute each), by the
// raw samples. ok is false when the rollup cannot answer at all (a bucket
// that is not whole minutes, a negative time, no whole minute in the range):
// then the raw samples answer [fromMS, toMS).
func MinuteSpan(fromMS, toMS, bucketMS int64) (lo, hi int64, ok bool) {
	if bucketMS <= 0 || bucketMS%ActivityMinuteMS != 0 || fromMS < 0 {
		return 0, 0, false
	}
	lo = (fromMS + ActivityMinuteMS - 1) / ActivityMinuteMS * ActivityMinuteMS
	hi = toMS / ActivityMinuteMS * ActivityMinuteMS
	if lo >= hi {
		return 0, 0, false
	}
	return lo, hi, true
}
