package fleet_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/fleet"
	"github.com/cardhour/cardhour/schemas"
)

const example = "../testdata/fleet.example.yaml"

func TestParseErrors(t *testing.T) {
	f := func(yaml, want string) {
		t.Helper()
		_, err := fleet.Parse([]byte(yaml))
		require.Error(t, err)
		require.Contains(t, err.Error(), want)
	}
	f("nodes:\n  - name: a\n    model: a100-80gb\n    gpus: [{}]\n    colour: red\n", "line 5: field colour not found")
	f("nodes: []\n", "at least one node")
	f("nodes:\n  - {name: a, model: t4, gpus: [{}]}\n", `model "t4"`)
	f("nodes:\n  - {name: a, model: a100-80gb, gpus: [{}]}\nholders:\n  - {name: h, project: p, instance: a/3, behaviour: training}\n", "line 4: holder \"h\": instance \"a/3\"")
	f("nodes:\n  - {name: a, model: a100-80gb, gpus: [{mig: [1g.10gb]}]}\nholders:\n  - {name: h, project: p, instance: a/0, behaviour: training}\n", "name the slot")
	f("nodes:\n  - {name: a, model: a100-80gb, gpus: [{}]}\nholders:\n  - {name: h, project: p, instance: a/0, behaviour: sleeping}\n", "behaviour \"sleeping\"")
	f("nodes:\n  - {name: a, model: a100-80gb, gpus: [{}]}\nholders:\n  - {name: h, project: p, instance: a/0, behaviour: training, start: soon}\n", "line 4: duration \"soon\"")
	f("interval: 100ms\nnodes:\n  - {name: a, model: a100-80gb, gpus: [{}]}\n", "interval")

	spec, err := fleet.Parse([]byte("nodes:\n  - {name: a, model: a100-80gb, gpus: [{mig: [4g.40gb, 4g.40gb]}]}\n"))
	require.NoError(t, err, "spec is valid; the layout is checked when built")
	_, err = fleet.Build(spec, collector.RealClock{}, time.Now())
	require.ErrorContains(t, err, "more than 7 slices")
}

func simulateDay(t *testing.T) []byte {
	t.Helper()
	spec, err := fleet.Load(example)
	require.NoError(t, err)
	var out bytes.Buffer
	pub := collector.NewJSONLPublisher(&out)
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	require.NoError(t, fleet.Simulate(context.Background(), fleet.SimulateConfig{Spec: spec, From: from, To: from.Add(24 * time.Hour),
		Interval: 5 * time.Minute, Publisher: pub}))
	require.NoError(t, pub.Flush())
	return out.Bytes()
}

func TestSimulateExampleFleet(t *testing.T) {
	data := simulateDay(t)
	require.Equal(t, data, simulateDay(t), "a simulation is deterministic")

	dec := schemas.NewDecoder()
	projects := map[string]bool{}
	models := map[string]bool{}
	profiles := map[string]bool{}
	sources := map[string]int{}
	var abandoned, idleNotebook int
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Equal(t, 29*288, len(lines), "29 instances, 288 five-minute samples each")
	for i, line := range lines {
		var s schemas.Sample
		require.NoError(t, dec.Decode([]byte(line), &s), "line %d", i+1)
		require.NoError(t, s.Validate())
		projects[s.Project] = true
		models[s.GPUModel] = true
		profiles[s.Profile] = true
		sources[s.UtilSource]++
		if s.User == "2025010104" {
			require.Zero(t, s.Processes, "nobody runs on the forgotten slice")
		}
		if s.Project == "ai101" && s.Processes == 0 {
			abandoned++
		}
		if s.User == "2022150002" && s.UtilKnown && s.Util < 0.05 {
			idleNotebook++
		}
	}
	require.Equal(t, map[string]bool{"": true, "nlp-lab": true, "cv-lab": true, "thesis-h100": true}, projects,
		"ai101 starts on day 3; the rest appear on day 1")
	require.Equal(t, map[string]bool{"NVIDIA A100-SXM4-80GB": true, "NVIDIA H100 80GB HBM3": true}, models)
	require.Equal(t, map[string]bool{"1g.10gb": true, "2g.20gb": true, "3g.40gb": true, "full": true}, profiles)
	require.Positive(t, sources["gpm"])
	require.Positive(t, sources["nvml"])
	require.Positive(t, sources["none"])
	require.Zero(t, abandoned)
	require.Positive(t, idleNotebook, "the thesis notebook is left idle and GPM sees it")
}

func TestRelease(t *testing.T) {
	spec, err := fleet.Load(example)
	require.NoError(t, err)
	from := time.Date(2026, 11, 2, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	clock := collector.NewFastForwardClock(from)
	f, err := fleet.Build(spec, clock, from)
	require.NoError(t, err)
	node := f.Nodes[0] // gpu-a100-01
	notebook := node.Sim.GPUs[1].Instances[1].UUID
	holderOf := func() string {
		t.Helper()
		got, err := f.Resolver(node).Resolve(context.Background(), []collector.Instance{{InstanceID: notebook}})
		require.NoError(t, err)
		return got[notebook].User
	}
	_, ok := f.Release(notebook)
	require.False(t, ok, "nobody holds the notebook's slice before 09:00")
	clock.Set(from.Add(12 * time.Hour)) // inside the first window (09:00-19:00)
	require.Equal(t, "2022110315", holderOf())
	name, ok := f.Release(notebook)
	require.True(t, ok)
	require.Equal(t, "cv-notebook", name)
	require.Empty(t, holderOf(), "released for the rest of the window")
	clock.Set(from.Add(18 * time.Hour))
	require.Empty(t, holderOf())
	clock.Set(from.Add(34 * time.Hour)) // the next day's window
	require.Equal(t, "2022110315", holderOf(), "the next window holds it again")
	_, ok = f.Release("MIG-not-here")
	require.False(t, ok)
}

// The shared fleet: vGPU instances, HAMi and time-sliced shares, each share
// its own instance, several holders on one card at once, every sample valid.
func TestSharedFleet(t *testing.T) {
	spec, err := fleet.Load("../testdata/fleet.shared.yaml")
	require.NoError(t, err)
	var out bytes.Buffer
	pub := collector.NewJSONLPublisher(&out)
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	require.NoError(t, fleet.Simulate(context.Background(), fleet.SimulateConfig{Spec: spec, From: from, To: from.Add(4 * 24 * time.Hour),
		Interval: 10 * time.Minute, Publisher: pub}))
	require.NoError(t, pub.Flush())
	kinds := map[string]int{}
	heldAt := map[string]map[int64]map[string]bool{} // GPU → ts → holders
	profiles := map[string]map[string]bool{}
	_, err = schemas.ReadSamples(bytes.NewReader(out.Bytes()), schemas.ReadOptions{Workers: 1}, func(_ int, ss []schemas.Sample) error {
		for _, s := range ss {
			require.NoError(t, s.Validate())
			kinds[s.ShareKind]++
			if s.ShareKind == "" {
				continue
			}
			if profiles[s.ShareKind] == nil {
				profiles[s.ShareKind] = map[string]bool{}
			}
			profiles[s.ShareKind][s.Profile] = true
			if s.Project == "" {
				continue
			}
			if heldAt[s.GPUUUID] == nil {
				heldAt[s.GPUUUID] = map[int64]map[string]bool{}
			}
			if heldAt[s.GPUUUID][s.StartMS] == nil {
				heldAt[s.GPUUUID][s.StartMS] = map[string]bool{}
			}
			require.False(t, heldAt[s.GPUUUID][s.StartMS][s.InstanceID], "one sample per share and tick")
			heldAt[s.GPUUUID][s.StartMS][s.InstanceID] = true
			switch s.ShareKind {
			case schemas.ShareVGPU:
				require.Regexp(t, `^vm:`, s.HolderRef)
				require.InDelta(t, 1.0/16, s.ShareMem, 1e-12)
			case schemas.ShareHAMi:
				require.Regexp(t, `^GPU-[0-9a-f-]+/share/[a-z-]+/[a-z0-9-]+/main$`, s.InstanceID)
				require.InDelta(t, 0.05, s.ShareMem, 1e-12)
				require.InDelta(t, 0.05, s.ShareCores, 1e-12)
				require.True(t, s.UtilKnown)
			case schemas.ShareTimeslice:
				require.InDelta(t, 0.25, s.ShareCores, 1e-12)
				require.Zero(t, s.ShareMem)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, kinds[schemas.ShareVGPU])
	require.Positive(t, kinds[schemas.ShareHAMi])
	require.Positive(t, kinds[schemas.ShareTimeslice])
	require.Equal(t, map[string]bool{"A16-1Q": true}, profiles[schemas.ShareVGPU])
	require.Equal(t, map[string]bool{"1/20": true}, profiles[schemas.ShareHAMi])
	require.Equal(t, map[string]bool{"1/4": true}, profiles[schemas.ShareTimeslice])
	most := 0
	for _, byTS := range heldAt {
		for _, hs := range byTS {
			most = max(most, len(hs))
		}
	}
	require.GreaterOrEqual(t, most, 10, "many holders on one card at the same time")
}

// Release frees a share (its instance id <gpu_uuid>/share/<ns>/<pod>/<container>)
// and a vGPU instance (its UUID) from their holders, as it frees a MIG slice:
// the holder of that slot only, for the rest of its window; the card's other
// shares stay held.
func TestReleaseShares(t *testing.T) {
	spec, err := fleet.Load("../testdata/fleet.shared.yaml")
	require.NoError(t, err)
	from := time.Date(2026, 11, 2, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))
	clock := collector.NewFastForwardClock(from)
	f, err := fleet.Build(spec, clock, from)
	require.NoError(t, err)
	vgpuNode, hamiNode := f.Nodes[0], f.Nodes[1]
	card := hamiNode.Sim.GPUs[0].Device.UUID
	forgotten := card + "/share/dl-course/dl-forgotten/main" // abandoned from 2d on
	notebook := card + "/share/dl-course/dl-nb-0/main"       // 09:00-17:00 every day
	vm := vgpuNode.Sim.GPUs[0].VGPUs[15].UUID                // ai101-vm-15, abandoned from 2d14h on
	holderOf := func(n *fleet.Node, id string) string {
		t.Helper()
		got, err := f.Resolver(n).Resolve(context.Background(), []collector.Instance{{InstanceID: id}})
		require.NoError(t, err)
		return got[id].User
	}
	_, ok := f.Release(forgotten)
	require.False(t, ok, "nobody holds the forgotten share before day 2")
	clock.Set(from.Add(3*24*time.Hour + 12*time.Hour)) // day 3, 12:00
	require.Equal(t, "2025030199", holderOf(hamiNode, forgotten))
	require.Equal(t, "2025030101", holderOf(hamiNode, notebook))
	require.Equal(t, "2025010216", holderOf(vgpuNode, vm))

	name, ok := f.Release(forgotten)
	require.True(t, ok)
	require.Equal(t, "dl-forgotten", name)
	require.Empty(t, holderOf(hamiNode, forgotten), "the share is freed")
	require.Equal(t, "2025030101", holderOf(hamiNode, notebook), "the card's other shares stay held")
	_, ok = f.Release(forgotten)
	require.False(t, ok, "released once")
	// The splitter no longer makes a share of the freed slot.
	whole := collector.Instance{InstanceID: card, GPUUUID: card, GPUIndex: 0, MemTotal: 80 << 30}
	shares, err := f.Splitter(hamiNode).Split(context.Background(), []collector.Instance{whole})
	require.NoError(t, err)
	var ids []string
	for _, s := range shares {
		ids = append(ids, s.InstanceID)
	}
	require.Contains(t, ids, notebook)
	require.NotContains(t, ids, forgotten)

	name, ok = f.Release(vm)
	require.True(t, ok)
	require.Equal(t, "ai101-vm-15", name)
	require.Empty(t, holderOf(vgpuNode, vm), "the vGPU instance is freed")
	clock.Set(from.Add(5 * 24 * time.Hour))
	require.Empty(t, holderOf(hamiNode, forgotten), "for the rest of the holder's window")
	require.Empty(t, holderOf(vgpuNode, vm))
	_, ok = f.Release(card + "/share/dl-course/nobody/main")
	require.False(t, ok)
}
