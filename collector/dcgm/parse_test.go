package dcgm_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector/dcgm"
)

const (
	migGPU   = "GPU-1170ec08-18a3-52ec-9e86-b5a9475dc62c" // nvmlmock a100-80gb, seed "dcgm-e2e", GPU 0 (MIG)
	wholeGPU = "GPU-209a3315-3148-5c93-99df-5602752e980c" // GPU 1 (MIG off)
)

// fixtureNow is 10 s after the fresh timestamp in stale-nan-duplicates.prom.
var fixtureNow = time.UnixMilli(1796108400000).Add(10 * time.Second)

func parseFile(t *testing.T, name string, maxAge time.Duration) (*dcgm.Result, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return dcgm.Parse(bytes.NewReader(b), fixtureNow, maxAge)
}

func TestParseMIGNode(t *testing.T) {
	res, err := parseFile(t, "a100-mig-node.prom", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 4, res.Series)
	require.Empty(t, res.Ignored)
	require.Equal(t, map[dcgm.Key]dcgm.Value{
		{GPUUUID: migGPU, GIID: 0}:               {Util: 0, Profile: "3g.40gb"},
		{GPUUUID: migGPU, GIID: 1}:               {Util: 0.873214, Profile: "2g.20gb"},
		{GPUUUID: migGPU, GIID: 2}:               {Util: 0, Profile: "1g.10gb"},
		{GPUUUID: wholeGPU, GIID: dcgm.WholeGPU}: {Util: 0.412577},
	}, res.Values, "GI 3 publishes no GR_ENGINE_ACTIVE: it is absent, not zero; other metrics are not read")
}

func TestParseWholeGPUsAndLabelSpellings(t *testing.T) {
	res, err := parseFile(t, "whole-gpus.prom", time.Minute)
	require.NoError(t, err, "hostname in lower case (releases after 4.5.3-4.8.2) is read like Hostname")
	require.Equal(t, map[dcgm.Key]dcgm.Value{
		{GPUUUID: "GPU-585834da-79ca-0599-5140-4ffdb131ae93", GIID: dcgm.WholeGPU}: {Util: 0.961044},
		{GPUUUID: "GPU-8f8001ff-73ba-2e83-3cdc-4156ae4f3912", GIID: dcgm.WholeGPU}: {Util: 0},
	}, res.Values)

	res, err = parseFile(t, "old-namespace.prom", time.Minute)
	require.NoError(t, err, "--use-old-namespace writes uuid, pod_name, …")
	require.Equal(t, map[dcgm.Key]dcgm.Value{
		{GPUUUID: "GPU-a810a1fc-9f46-0e6f-5cef-bf34c2248e12", GIID: 1}: {Util: 0.25, Profile: "3g.20gb"},
		{GPUUUID: "GPU-a810a1fc-9f46-0e6f-5cef-bf34c2248e12", GIID: 2}: {Util: 0, Profile: "3g.20gb"},
	}, res.Values)
}

func TestParseStaleNaNDuplicates(t *testing.T) {
	const gpu = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"
	res, err := parseFile(t, "stale-nan-duplicates.prom", 2*time.Minute)
	require.NoError(t, err)
	require.Equal(t, 12, res.Series)
	require.Equal(t, map[dcgm.Key]dcgm.Value{
		{GPUUUID: gpu, GIID: 7}:  {Util: 0.03125, Profile: "1g.10gb"},
		{GPUUUID: gpu, GIID: 13}: {Util: 0.0625, Profile: "1g.10gb"},
	}, res.Values)
	require.Equal(t, map[string]int{
		dcgm.IgnoredStale:      1, // GI 8: five minutes old
		dcgm.IgnoredNaN:        2, // GI 9 NaN, GI 10 +Inf
		dcgm.IgnoredOutOfRange: 2, // GI 11 1.25, GI 12 -0.01
		dcgm.IgnoredDuplicate:  1, // GI 13 once per pod, same value: used once
		dcgm.IgnoredConflict:   2, // GI 14 two pods, two values: neither
		dcgm.IgnoredLabels:     2, // GPU_I_ID="x"; no UUID
	}, res.Ignored)
	require.Equal(t, []string{"bad_labels", "conflict", "duplicate", "nan", "out_of_range", "stale"}, res.IgnoredReasons())

	res, err = parseFile(t, "stale-nan-duplicates.prom", 0)
	require.NoError(t, err)
	require.Contains(t, res.Values, dcgm.Key{GPUUUID: gpu, GIID: 8}, "max age 0: timestamps are not checked")
}

func TestParseRejectsMalformedExpositions(t *testing.T) {
	_, err := parseFile(t, "garbage-line.prom", time.Minute)
	require.ErrorContains(t, err, "line 4", "the error names the line")

	head := "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.\n" +
		"# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
	good := `DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A30",GPU_I_PROFILE="1g.6gb",GPU_I_ID="3",Hostname="n1"} 0.000000` + "\n"
	for name, tc := range map[string]struct{ text, want string }{
		"an HTML error page":          {"<html><body>502 Bad Gateway</body></html>\n", "line 1"},
		"a bare word":                 {head + good + "garbage\n", "line 4"},
		"a truncated line":            {head + good + `DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-1"` + "\n", "line 4"},
		"a value not a float":         {head + strings.Replace(good, "0.000000", "zero", 1), "line 3"},
		"a second TYPE line":          {head + good + "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n", "line 4"},
		"a counter":                   {strings.Replace(head, " gauge", " counter", 1) + good, "has type COUNTER, want gauge"},
		"a duplicate label":           {head + strings.Replace(good, `gpu="0"`, `gpu="0",gpu="0"`, 1), "line 3"},
		"another family's name alone": {head + good + "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\nDCGM_FI_DEV_SM_CLOCK\n", "line 5"},
		"a line of digits":            {head + good + "1410\n", "line 4"},
		"ours after a bad line":       {head + "<p>\n" + good, "line 3"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := dcgm.Parse(strings.NewReader(tc.text), fixtureNow, time.Minute)
			require.ErrorContains(t, err, tc.want)
		})
	}

	res, err := dcgm.Parse(strings.NewReader(head+good), fixtureNow, time.Minute)
	require.NoError(t, err, "the same text without the fault parses")
	require.Equal(t, map[dcgm.Key]dcgm.Value{{GPUUUID: "GPU-1", GIID: 3}: {Profile: "1g.6gb"}}, res.Values)

	res, err = dcgm.Parse(strings.NewReader(""), fixtureNow, time.Minute)
	require.NoError(t, err, "an exporter without profiling metrics (a GPU before Volta) has no series")
	require.Empty(t, res.Values)
}

// nodeExposition renders what dcgm-exporter serves for a node of gpus A100s
// split into 7 × 1g.10gb, with the default counters' families.
func nodeExposition(gpus int) []byte {
	var b bytes.Buffer
	families := []string{"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
		"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
		"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"}
	for _, f := range families {
		fmt.Fprintf(&b, "# HELP %s Help text of %s.\n# TYPE %s gauge\n", f, f, f)
		for g := range gpus {
			for gi := 7; gi < 14; gi++ {
				fmt.Fprintf(&b, `%s{gpu="%d",UUID="GPU-%08x-18a3-52ec-9e86-b5a9475dc62c",pci_bus_id="00000000:%02X:00.0",device="nvidia%d",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="1g.10gb",GPU_I_ID="%d",Hostname="gpu-a100-01",DCGM_FI_DRIVER_VERSION="550.127.05",container="main",namespace="lab-%d",pod="notebook-%d-%d"} %f`+"\n",
					f, g, g, 7+g*8, g, gi, gi, g, gi, float64(gi%3)/3)
			}
		}
	}
	return b.Bytes()
}

// BenchmarkParseNode parses one scrape of an 8-GPU node split 7 × 1g.10gb
// (56 instances × 16 families).
func BenchmarkParseNode(b *testing.B) {
	text := nodeExposition(8)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := dcgm.ParseBytes(text, fixtureNow, time.Minute)
		if err != nil || len(res.Values) != 56 {
			b.Fatal(err, len(res.Values))
		}
	}
}

func TestParseReadsOnlyItsOwnFamily(t *testing.T) {
	text := `# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE_X Not the metric.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE_X counter
DCGM_FI_PROF_GR_ENGINE_ACTIVE_X{gpu="0",UUID="GPU-1"} 7
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-1",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A30"} 1440
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
  DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A30"} 0.500000
`
	res, err := dcgm.Parse(strings.NewReader(text), fixtureNow, time.Minute)
	require.NoError(t, err)
	require.Equal(t, map[dcgm.Key]dcgm.Value{{GPUUUID: "GPU-1", GIID: dcgm.WholeGPU}: {Util: 0.5}}, res.Values)
	require.Equal(t, 1, res.Series)
}
