package schemas

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shareTails are share fields as AppendJSON writes them, after the extras.
var shareTails = []string{
	`,"share_kind":"hami","share_mem":0.05,"share_cores":0.25`,
	`,"share_kind":"vgpu","share_mem":0.0625`,
	`,"share_kind":"timeslice","share_cores":0.3333333333333333`,
	`,"share_kind":"timeslice","share_cores":1`,
}

func TestShareRoundTrip(t *testing.T) {
	base, err := DecodeSample([]byte(canonicalLine))
	require.NoError(t, err)
	for _, sh := range []struct {
		kind       string
		mem, cores float64
	}{{ShareHAMi, 0.05, 0.25}, {ShareVGPU, 1.0 / 16, 0}, {ShareTimeslice, 0, 1.0 / 3}, {ShareHAMi, 1e-9, 1}} {
		s := base
		s.ShareKind, s.ShareMem, s.ShareCores = sh.kind, sh.mem, sh.cores
		s.HolderRef, s.UtilSource = "vm:42", "nvml"
		require.NoError(t, s.Validate())
		line := string(s.AppendJSON(nil))
		got, err := decodeBoth(t, []string{canonicalLine, line}, line)
		require.NoError(t, err, line)
		require.Equal(t, s, got, line)
		var fast Sample // the collector's layout takes the fast path
		require.True(t, NewDecoder().decodeFast([]byte(line), &fast), line)
		require.Equal(t, s, fast, line)
	}
	// Without shares nothing is written: existing lines are unchanged byte for byte.
	require.NotContains(t, string(base.AppendJSON(nil)), "share")
	require.Equal(t, canonicalLine, string(base.AppendJSON(nil)))
}

func TestShareFieldErrors(t *testing.T) {
	tail := func(s string) string { return strings.Replace(canonicalLine, `}`, s+`}`, 1) }
	for _, c := range []struct{ line, field string }{
		{tail(`,"share_kind":"mig","share_mem":0.5`), "share_kind"},
		{tail(`,"share_kind":"","share_mem":0.5`), "share_kind"},
		{tail(`,"share_kind":"hami"`), "share_kind"},
		{tail(`,"share_mem":0.5`), "share_mem"},
		{tail(`,"share_cores":0.5`), "share_cores"},
		{tail(`,"share_kind":"hami","share_mem":0`), "share_mem"},
		{tail(`,"share_kind":"hami","share_mem":-0`), "share_mem"},
		{tail(`,"share_kind":"hami","share_mem":1.0000001`), "share_mem"},
		{tail(`,"share_kind":"hami","share_cores":2`), "share_cores"},
		{tail(`,"share_kind":"hami","share_cores":"0.5"`), "share_cores"},
		{tail(`,"share_kind":"hami","share_cores":null`), "share_cores"},
		{tail(`,"share_kind":"hami","share_cores":1e-400`), "share_cores"},
		{tail(`,"share_kind":7,"share_cores":0.5`), "share_kind"},
		{tail(`,"share_kind":"hami","share_mem":0.5,"share_mem":0.5`), "share_mem"},
	} {
		_, err := decodeBoth(t, []string{canonicalLine}, c.line)
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", c.line, err)
		require.Equal(t, c.field, fe.Field, c.line)
	}
	// The same rules for a sample built in Go.
	s, err := DecodeSample([]byte(canonicalLine))
	require.NoError(t, err)
	for _, c := range []struct {
		kind       string
		mem, cores float64
		field      string
	}{{"mig", 0.5, 0, "share_kind"}, {ShareHAMi, 0, 0, "share_kind"}, {"", 0.5, 0, "share_mem"}, {"", 0, 0.5, "share_cores"},
		{ShareHAMi, 1.5, 0, "share_mem"}, {ShareHAMi, -0.5, 0, "share_mem"}, {ShareVGPU, 0.5, 7, "share_cores"}} {
		s.ShareKind, s.ShareMem, s.ShareCores = c.kind, c.mem, c.cores
		var fe *FieldError
		require.True(t, errors.As(s.Validate(), &fe), "%+v", c)
		require.Equal(t, c.field, fe.Field, "%+v", c)
	}
}

// The share fields in another order and with whitespace: the general path.
func TestShareGeneralLayout(t *testing.T) {
	line := `{"share_cores": 0.25, "ts":"2026-11-01T00:00:00Z","interval_s":10,"node":"n","gpu_uuid":"GPU-1","gpu_model":"T4",` +
		`"instance_id":"GPU-1/share/ai101/nb-0/main","profile":"1/4","project":"ai101","user":"","util":null,` +
		`"mem_used_bytes":0,"mem_total_bytes":0,"processes":0, "share_kind" : "timeslice"}`
	got, err := decodeBoth(t, nil, line)
	require.NoError(t, err)
	require.Equal(t, ShareTimeslice, got.ShareKind)
	require.Equal(t, 0.25, got.ShareCores)
	require.Zero(t, got.ShareMem)
}

func BenchmarkDecodeSampleShare(b *testing.B) {
	line := []byte(strings.Replace(canonicalLine, `}`, shareTails[0]+`}`, 1))
	dec := NewDecoder()
	var s Sample
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if err := dec.Decode(line, &s); err != nil {
			b.Fatal(err)
		}
	}
}
