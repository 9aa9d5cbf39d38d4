// Package schemas holds the contracts between cardhour's stages: the wire format
// of a usage sample (cardhour.sample.v1), the price catalog, and the JSON Schema
// files that describe both. Every stage decodes and validates through this package,
// so a sample means the same thing to the collector, ingest and billing.
package schemas

import (
	"errors"
	"fmt"
	"time"
)

// SampleSchemaV1 names the only sample format version this build understands.
const SampleSchemaV1 = "cardhour.sample.v1"

// SampleTopicV1 is the default Kafka topic that carries cardhour.sample.v1.
const SampleTopicV1 = "cardhour.samples.v1"

// Sample is one observation: during [Start, Start+Interval) the GPU instance
// InstanceID existed on Node and was held by Project/User (Project empty: not held).
//
// Times are kept as integer Unix milliseconds, the precision of the wire format, so
// that interval arithmetic in billing is exact.
type Sample struct {
	StartMS     int64 // ts, Unix milliseconds
	IntervalMS  int64 // interval_s × 1000, > 0
	Node        string
	GPUUUID     string
	GPUModel    string
	InstanceID  string
	Profile     string
	Project     string
	User        string
	Util        float64 // valid only when UtilKnown
	UtilKnown   bool    // false: util was null (not measurable)
	MemUsed     int64
	MemTotal    int64
	Processes   int64
	UtilSource  string // optional extra: nvml | gpm | dcgm | none
	SchemaField string // optional "schema" field as received (empty when absent)
	HolderRef   string // optional "holder_ref": k8s:<ns>/<pod> | slurm:<jobid> | pid:<pid> | vm:<vm id>; not part of Key
	// A share of a card (a vGPU instance, a HAMi allocation, a time-sliced
	// replica): ShareKind is ShareVGPU, ShareHAMi or ShareTimeslice, and
	// ShareMem / ShareCores the share's fraction of the card's memory and
	// compute, in (0, 1]. All three are absent (empty, 0) on whole cards and
	// MIG slices; a share has at least one of the two fractions.
	ShareKind  string  // optional "share_kind"
	ShareMem   float64 // optional "share_mem"; 0: absent
	ShareCores float64 // optional "share_cores"; 0: absent
}

// The kinds of share (share_kind).
const (
	ShareVGPU      = "vgpu"      // an NVIDIA vGPU instance on a host (one VM)
	ShareHAMi      = "hami"      // a HAMi allocation (nvidia.com/gpumem, nvidia.com/gpucores) of a pod's container
	ShareTimeslice = "timeslice" // time-sliced replicas (device IDs GPU-…::N) of a pod's container
)

// ValidShareKind reports whether k is a share_kind of the format.
func ValidShareKind(k string) bool {
	return k == ShareVGPU || k == ShareHAMi || k == ShareTimeslice
}

// EndMS is the exclusive end of the covered interval.
func (s *Sample) EndMS() int64 { return s.StartMS + s.IntervalMS }

// Time returns ts as a time.Time in UTC.
func (s *Sample) Time() time.Time { return time.UnixMilli(s.StartMS).UTC() }

// Validate checks the ranges of a sample built in Go (the decoder checks the same
// rules while parsing). It names the first offending field.
func (s *Sample) Validate() error {
	switch {
	case s.IntervalMS <= 0:
		return &FieldError{Field: "interval_s", Value: fmt.Sprint(float64(s.IntervalMS) / 1000), Reason: "must be > 0 (at least 0.001)"}
	case s.StartMS < minUnixMS || s.StartMS > maxUnixMS:
		return &FieldError{Field: "ts", Value: fmt.Sprint(s.StartMS), Reason: "out of range (years 1970-9999)"}
	case s.Node == "":
		return &FieldError{Field: "node", Value: `""`, Reason: "must not be empty"}
	case s.GPUUUID == "":
		return &FieldError{Field: "gpu_uuid", Value: `""`, Reason: "must not be empty"}
	case s.GPUModel == "":
		return &FieldError{Field: "gpu_model", Value: `""`, Reason: "must not be empty"}
	case s.InstanceID == "":
		return &FieldError{Field: "instance_id", Value: `""`, Reason: "must not be empty"}
	case s.Profile == "":
		return &FieldError{Field: "profile", Value: `""`, Reason: "must not be empty"}
	case s.UtilKnown && !(s.Util >= 0 && s.Util <= 1):
		return &FieldError{Field: "util", Value: fmt.Sprint(s.Util), Reason: "must be in [0,1] or null"}
	case s.MemUsed < 0:
		return &FieldError{Field: "mem_used_bytes", Value: fmt.Sprint(s.MemUsed), Reason: "must be >= 0"}
	case s.MemTotal < 0:
		return &FieldError{Field: "mem_total_bytes", Value: fmt.Sprint(s.MemTotal), Reason: "must be >= 0"}
	case s.Processes < 0:
		return &FieldError{Field: "processes", Value: fmt.Sprint(s.Processes), Reason: "must be >= 0"}
	case s.SchemaField != "" && s.SchemaField != SampleSchemaV1:
		return &FieldError{Field: "schema", Value: s.SchemaField, Reason: "unknown sample format version (this build reads " + SampleSchemaV1 + ")"}
	}
	return s.validateShare()
}

// validateShare checks the share fields: a known kind, fractions in (0, 1],
// at least one fraction with a kind and none without.
func (s *Sample) validateShare() error {
	if s.ShareKind == "" && s.ShareMem == 0 && s.ShareCores == 0 {
		return nil // a whole card or a MIG slice: the common case
	}
	switch {
	case s.ShareKind != "" && !ValidShareKind(s.ShareKind):
		return &FieldError{Field: "share_kind", Value: quoteString(s.ShareKind), Reason: "unknown kind of share (want vgpu, hami or timeslice)"}
	case s.ShareMem != 0 && !(s.ShareMem > 0 && s.ShareMem <= 1):
		return &FieldError{Field: "share_mem", Value: fmt.Sprint(s.ShareMem), Reason: "must be in (0,1]"}
	case s.ShareCores != 0 && !(s.ShareCores > 0 && s.ShareCores <= 1):
		return &FieldError{Field: "share_cores", Value: fmt.Sprint(s.ShareCores), Reason: "must be in (0,1]"}
	case s.ShareKind == "" && s.ShareMem != 0:
		return &FieldError{Field: "share_mem", Value: fmt.Sprint(s.ShareMem), Reason: "needs share_kind"}
	case s.ShareKind == "":
		return &FieldError{Field: "share_cores", Value: fmt.Sprint(s.ShareCores), Reason: "needs share_kind"}
	case s.ShareMem == 0 && s.ShareCores == 0:
		return &FieldError{Field: "share_kind", Value: quoteString(s.ShareKind), Reason: "needs share_mem or share_cores"}
	}
	return nil
}

func quoteString(v string) string { return quote([]byte(v)) }

// FieldError is a validation error that names the field and the offending value.
type FieldError struct {
	Field  string
	Value  string
	Reason string
	// Err classifies the problem when a caller may act on it (errors.Is):
	// ErrIntervalTooLong, ErrFutureSample; nil for the others.
	Err error
}

// Unwrap returns the class of the problem, if it has one.
func (e *FieldError) Unwrap() error { return e.Err }

// Samples outside the bounds a reader sets (DecoderOptions), as opposed to
// samples outside the format.
var (
	// ErrIntervalTooLong marks an interval_s above DecoderOptions.MaxInterval.
	ErrIntervalTooLong = errors.New("interval_s longer than the maximum accepted")
	// ErrFutureSample marks a sample that ends after the reader's clock plus
	// DecoderOptions.MaxClockSkew.
	ErrFutureSample = errors.New("sample ends in the future")
)

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("field %q: value %s: %s", e.Field, e.Value, e.Reason)
}

// LineError wraps an error with the 1-based line number of the input it came from.
type LineError struct {
	Line int64
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

const (
	minUnixMS = 0                   // 1970-01-01T00:00:00Z
	maxUnixMS = 253402300799999     // 9999-12-31T23:59:59.999Z
	maxIntMS  = 1000 * 86400 * 3660 // 10 years: the longest interval_s accepted
)
