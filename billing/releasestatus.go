package billing

import "slices"

// ReleaseStatus is where a release of an idle instance is: the one list the
// state store records, the watcher decides, the invoice document shows and
// the API filters by.
type ReleaseStatus string

// Release statuses: pending (recorded before the attempt), done (something
// was released), dry_run (recorded what would have been done), failed
// (retried later, or for good).
const (
	ReleasePending ReleaseStatus = "pending"
	ReleaseDone    ReleaseStatus = "done"
	ReleaseDryRun  ReleaseStatus = "dry_run"
	ReleaseFailed  ReleaseStatus = "failed"
)

// ReleaseStatuses lists every status, in a fixed order.
var ReleaseStatuses = []ReleaseStatus{ReleasePending, ReleaseDone, ReleaseDryRun, ReleaseFailed}

// Valid reports whether s is one of ReleaseStatuses.
func (s ReleaseStatus) Valid() bool { return slices.Contains(ReleaseStatuses, s) }
