package schemas

// Rows of the usage, held-now and data-quality reads (reads.Usage,
// reads.HeldNow, reads.CheckDataQuality): what a store's queries return.

// UsageRowQuery is what Usage asks a store for: sums of held samples over
// [FromMS, ToMS) (by sample start), grouped by the fields with their By flag
// set plus always gpu_model and profile (to price), and by bucket of BucketMS
// (UTC-aligned, sample start) when BucketMS > 0.
type UsageRowQuery struct {
	FromMS, ToMS int64
	Projects     []string
	Users        []string
	Nodes        []string
	// Models restricts to these (gpu_model, profile) pairs when non-nil
	// (a SKU filter); an empty non-nil list matches nothing.
	Models                        [][2]string
	ByProject, ByUser, ByInstance bool
	ByNode                        bool
	BucketMS                      int64
	// BucketOffsetMS shifts the buckets: they start at BucketOffsetMS plus
	// multiples of BucketMS (0 <= BucketOffsetMS < BucketMS; local days of a
	// zone with a fixed offset over the range).
	BucketOffsetMS int64
	// A held sample is idle when util is known and below the threshold of
	// its project (IdleByProject, else IdleDefault), or util is unknown and
	// it saw no process.
	IdleDefault   float64
	IdleByProject map[string]float64
}

// UsageRow is one group a store returns for a UsageRowQuery; fields not
// grouped by are empty (BucketMS 0).
type UsageRow struct {
	Project, User, InstanceID, Node string
	GPUModel, Profile               string
	BucketMS                        int64
	HeldMS, IdleMS                  int64
}

// RejectRow is one rejected input as a store keeps it.
type RejectRow struct {
	TimeMS int64        `json:"time_ms"`
	Source string       `json:"source"`
	Reason RejectReason `json:"reason"`
	Error  string       `json:"error"`
}

// UnattributedUsage is busy time without a holder on one instance.
type UnattributedUsage struct {
	Node       string `json:"node"`
	InstanceID string `json:"instance_id"`
	Seconds    int64  `json:"seconds"` // card-seconds
}

// NodeBucketRow says a node sent samples in the bucket starting at BucketMS.
type NodeBucketRow struct {
	Node     string
	BucketMS int64
}
