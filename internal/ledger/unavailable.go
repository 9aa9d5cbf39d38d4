package ledger

import "github.com/cardhour/cardhour/internal/storefail"

// ErrUnavailable: the store cannot answer for now (its disk is full, its
// file system read-only, its server unreachable or restarting, its file
// locked by another writer); retrying later may succeed. Stores classify
// their driver's errors (internal/storefail) and wrap the driver's error,
// so errors.As still finds it; storefail.Cause names the cause.
var ErrUnavailable = storefail.ErrUnavailable
