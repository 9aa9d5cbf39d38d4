package schemas

import "slices"

// RejectReason says why ingest did not store an input line or message: the
// one list of the values of a dead letter's reason header, of the reject
// rows the stores keep, and of the ingest dead-letter counter's reason label.
type RejectReason string

const (
	// RejectMalformedJSON: the line is not JSON, or a message holds no
	// sample at all.
	RejectMalformedJSON RejectReason = "malformed_json"
	// RejectInvalidField: a field is missing, of the wrong type or out of
	// range.
	RejectInvalidField RejectReason = "invalid_field"
	// RejectIntervalTooLong: interval_s is over --max-interval.
	RejectIntervalTooLong RejectReason = "interval_too_long"
	// RejectFutureTS: the sample ends more than --max-clock-skew after the
	// ingest clock.
	RejectFutureTS RejectReason = "future_ts"
	// RejectUnknownSchema: the schema header or field names a version this
	// build does not read.
	RejectUnknownSchema RejectReason = "unknown_schema"
)

// RejectReasons lists every reason, in a fixed order.
var RejectReasons = []RejectReason{RejectMalformedJSON, RejectInvalidField, RejectIntervalTooLong, RejectFutureTS,
	RejectUnknownSchema}

// Valid reports whether r is one of RejectReasons.
func (r RejectReason) Valid() bool { return slices.Contains(RejectReasons, r) }
