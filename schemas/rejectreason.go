package schemas

import "slices"

// RejectReason says why ingest did not store an input line or message: the
// one list of the values of a dead letter's reason header, of the reject
// rows the stores keep, and of the ingest dead-letter counter's reason label.
type RejectReason string

// Reject reasons: malformed_json (not JSON, or a message without a single
// sample), invalid_field (a field missing, of the wrong type or out of
// range), interval_too_long (interval_s over --max-interval), future_ts (the
// sample ends more than --max-clock-skew after the ingest clock),
// unknown_schema (the schema header or field names a version this build does
// not read).
const (
	RejectMalformedJSON   RejectReason = "malformed_json"
	RejectInvalidField    RejectReason = "invalid_field"
	RejectIntervalTooLong RejectReason = "interval_too_long"
	RejectFutureTS        RejectReason = "future_ts"
	RejectUnknownSchema   RejectReason = "unknown_schema"
)

// RejectReasons lists every reason, in a fixed order.
var RejectReasons = []RejectReason{RejectMalformedJSON, RejectInvalidField, RejectIntervalTooLong, RejectFutureTS, RejectUnknownSchema}

// Valid reports whether r is one of RejectReasons.
func (r RejectReason) Valid() bool { return slices.Contains(RejectReasons, r) }
