package dcgm

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric is the dcgm-exporter metric read: DCGM_FI_PROF_GR_ENGINE_ACTIVE, the
// ratio (0..1) of time the graphics engine of a GPU, or of a MIG GPU instance,
// was active over DCGM's sampling period.
const Metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

// Labels dcgm-exporter writes on every GPU metric (its rendermetrics template):
// gpu, UUID (uuid with --use-old-namespace), pci_bus_id, device, modelName, then
// GPU_I_PROFILE and GPU_I_ID for a MIG GPU instance only, Hostname (hostname
// in releases after 4.5.3-4.8.2), label fields such as DCGM_FI_DRIVER_VERSION,
// and in Kubernetes pod, namespace and container. A series is matched by UUID
// and GPU_I_ID alone: UUID is the physical GPU's on MIG rows too.
const (
	LabelUUID      = "UUID"
	LabelUUIDOld   = "uuid" // dcgm-exporter --use-old-namespace
	LabelGIID      = "GPU_I_ID"
	LabelGIProfile = "GPU_I_PROFILE"
	WholeGPU       = -1 // Key.GIID of a GPU without MIG
)

// Key is one GPU instance as dcgm-exporter names it: the GPU's UUID and the
// GPU instance ID (NVML's), or WholeGPU for a series without GPU_I_ID.
type Key struct {
	GPUUUID string
	GIID    int
}

// Value is the usable reading of one GPU instance.
type Value struct {
	Util    float64 // in [0, 1]
	Profile string  // GPU_I_PROFILE as published; empty for a whole GPU
}

// Reasons a series of Metric is not used (Result.Ignored, and the
// cardhour_collector_dcgm_series_ignored_total metric).
const (
	IgnoredNaN        = "nan"          // NaN or ±Inf
	IgnoredOutOfRange = "out_of_range" // below 0 or above 1
	IgnoredStale      = "stale"        // carries a timestamp older than the maximum age
	IgnoredLabels     = "bad_labels"   // no UUID, or GPU_I_ID not a non-negative integer
	IgnoredDuplicate  = "duplicate"    // the same instance again with the same value and profile (one per pod, say): used once
	IgnoredConflict   = "conflict"     // the same instance with different values or profiles: none is used
)

// Result is what one exposition says about Metric.
type Result struct {
	Values  map[Key]Value
	Ignored map[string]int // reason → series
	Series  int            // series of Metric in the exposition
}

// Parse reads a Prometheus text exposition (version 0.0.4, what dcgm-exporter
// serves) strictly: a malformed line rejects the whole exposition with an
// error that names the line, so a truncated body or an error page never
// yields values. Every line must be blank, a comment, or start with a metric
// name followed by labels or a value; the lines of Metric (its samples, HELP
// and TYPE) are parsed in full by the Prometheus text parser, the other
// families' no further (dcgm-exporter publishes a few dozen of them per
// instance). Metric must be a gauge (or untyped).
// A series with an explicit timestamp older than maxAge before now is stale
// (maxAge <= 0: timestamps are not checked); dcgm-exporter writes none.
func Parse(r io.Reader, now time.Time, maxAge time.Duration) (*Result, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("dcgm-exporter metrics: %w", err)
	}
	return ParseBytes(text, now, maxAge)
}

// ParseBytes is Parse over text already read.
func ParseBytes(text []byte, now time.Time, maxAge time.Duration) (*Result, error) {
	own, shapeErr := ownLines(text)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(own))
	if err != nil { // on a line before the misshapen one, if any: the first fault
		return nil, fmt.Errorf("dcgm-exporter metrics: %w", err)
	}
	if shapeErr != nil {
		return nil, fmt.Errorf("dcgm-exporter metrics: %w", shapeErr)
	}
	res := &Result{Values: map[Key]Value{}, Ignored: map[string]int{}}
	mf, ok := fams[Metric]
	if !ok {
		return res, nil
	}
	switch t := mf.GetType(); t {
	case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
	default:
		return nil, fmt.Errorf("dcgm-exporter metrics: %s has type %s, want gauge", Metric, t)
	}
	type reading struct {
		v       float64
		profile string
	}
	byKey := map[Key][]reading{}
	var order []Key
	for _, m := range mf.GetMetric() {
		res.Series++
		var v float64
		if mf.GetType() == dto.MetricType_GAUGE {
			v = m.GetGauge().GetValue()
		} else {
			v = m.GetUntyped().GetValue()
		}
		key, profile, ok := seriesKey(m.GetLabel())
		switch {
		case !ok:
			res.Ignored[IgnoredLabels]++
			continue
		case math.IsNaN(v) || math.IsInf(v, 0):
			res.Ignored[IgnoredNaN]++
			continue
		case v < 0 || v > 1:
			res.Ignored[IgnoredOutOfRange]++
			continue
		case maxAge > 0 && m.TimestampMs != nil && now.Sub(time.UnixMilli(m.GetTimestampMs())) > maxAge:
			res.Ignored[IgnoredStale]++
			continue
		}
		if _, seen := byKey[key]; !seen {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], reading{v, profile})
	}
	for _, k := range order {
		rs := byKey[k]
		agree := true
		for _, r := range rs[1:] {
			if r != rs[0] {
				agree = false
				break
			}
		}
		if !agree {
			res.Ignored[IgnoredConflict] += len(rs)
			continue
		}
		res.Ignored[IgnoredDuplicate] += len(rs) - 1
		res.Values[k] = Value{Util: rs[0].v, Profile: rs[0].profile}
	}
	for reason, n := range res.Ignored {
		if n == 0 {
			delete(res.Ignored, reason)
		}
	}
	return res, nil
}

// ownLines checks the shape of every line of text and returns it with every
// line that is not about Metric blanked (line numbers stay those of text). On
// a misshapen line it returns the lines before it and an error naming it.
func ownLines(text []byte) ([]byte, error) {
	out := make([]byte, 0, 8<<10)
	for n := 1; len(text) > 0; n++ {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		t := bytes.TrimLeft(line, " \t")
		switch {
		case len(t) == 0:
		case t[0] == '#':
			f := bytes.Fields(t[1:])
			if len(f) >= 2 && (string(f[0]) == "HELP" || string(f[0]) == "TYPE") && string(f[1]) == Metric {
				out = append(out, line...)
			}
		default:
			k := 0
			for k < len(t) && isNameByte(t[k], k == 0) {
				k++
			}
			if k == 0 || k == len(t) || (t[k] != '{' && t[k] != ' ' && t[k] != '\t') {
				return out, fmt.Errorf("line %d: want a comment or a sample (metric name, labels, value): %q", n, clip(line))
			}
			if string(t[:k]) == Metric {
				out = append(out, line...)
			}
		}
		out = append(out, '\n')
	}
	return out, nil
}

func isNameByte(b byte, first bool) bool {
	return b == '_' || b == ':' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (!first && b >= '0' && b <= '9')
}

func clip(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// seriesKey reads the instance a series describes from its labels.
func seriesKey(labels []*dto.LabelPair) (Key, string, bool) {
	var uuid, uuidOld, giid, profile string
	hasGIID := false
	for _, l := range labels {
		switch l.GetName() {
		case LabelUUID:
			uuid = l.GetValue()
		case LabelUUIDOld:
			uuidOld = l.GetValue()
		case LabelGIID:
			giid, hasGIID = l.GetValue(), true
		case LabelGIProfile:
			profile = l.GetValue()
		}
	}
	if uuid == "" {
		uuid = uuidOld
	}
	if uuid == "" {
		return Key{}, "", false
	}
	if !hasGIID || giid == "" {
		if profile != "" {
			return Key{}, "", false // a profile without an instance ID names nothing
		}
		return Key{GPUUUID: uuid, GIID: WholeGPU}, "", true
	}
	id, err := strconv.Atoi(giid)
	if err != nil || id < 0 {
		return Key{}, "", false
	}
	return Key{GPUUUID: uuid, GIID: id}, profile, true
}

// IgnoredReasons returns the reasons in r.Ignored, sorted (for stable logs).
func (r *Result) IgnoredReasons() []string {
	out := make([]string, 0, len(r.Ignored))
	for k := range r.Ignored {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
