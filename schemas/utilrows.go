package schemas

// UtilRowQuery is what the efficiency reads (reads.Occupancy,
// reads.UtilHeatmap) ask a store for: sums over every sample, held or not,
// that starts in [FromMS, ToMS), grouped by gpu_model (unless AllModels:
// every model in one group, gpu_model empty; with ByNode or BucketMS), by
// node when ByNode, and by bucket of BucketMS (UTC-aligned, sample start)
// when BucketMS > 0.
type UtilRowQuery struct {
	FromMS, ToMS int64
	ByNode       bool
	AllModels    bool
	BucketMS     int64
}

// UtilRow is one group a store returns for a UtilRowQuery (Node, GPUModel
// empty and BucketMS 0 when not grouped by them). Times are sums of sample intervals.
type UtilRow struct {
	Node, GPUModel string
	BucketMS       int64
	// SeenMS: every sample (the instances that exist, held or not);
	// HeldMS: the held ones (a project); MeasuredMS: those with a known
	// util, held or not, and UtilMS the sum of util × interval over them;
	// HeldUnmeasuredMS: held samples whose util is unknown (null).
	SeenMS, HeldMS, MeasuredMS, HeldUnmeasuredMS int64
	UtilMS                                       float64
}
