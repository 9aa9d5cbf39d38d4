// Package fleet simulates a fleet of GPU nodes for demos and tests. A YAML file
// describes the nodes (GPU model, MIG layout per GPU) and scripted holders whose
// processes, memory and utilisation change over time; Build turns it into go-nvml
// mock servers (collector/nvmlmock) that the real NVML source reads, and a
// Resolver that attributes instances the way a scheduler would.
//
// Every value is a pure function of the simulated time, so a fleet replayed with
// a fast-forward clock writes the same samples every time.
package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/collector/nvmlmock"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Spec is a fleet file.
type Spec struct {
	// Interval is the sampling interval `cardhour simulate` uses by default.
	Interval Duration `yaml:"interval"`
	// ModelNames overrides gpu_model per NVML product name.
	ModelNames map[string]string `yaml:"model_names"`
	Nodes      []NodeSpec        `yaml:"nodes"`
	Holders    []HolderSpec      `yaml:"holders"`
}

// NodeSpec is one server.
type NodeSpec struct {
	Name  string    `yaml:"name"`
	Model string    `yaml:"model"` // a100-80gb | a100-40gb | h100-80gb
	GPUs  []GPUSpec `yaml:"gpus"`
	line  int
}

// GPUSpec is one card: MIG profiles, vGPU instances, shares, or none of
// them for the whole card.
type GPUSpec struct {
	MIG    []string    `yaml:"mig"`
	VGPU   *VGPUSpec   `yaml:"vgpu"`
	Shares *SharesSpec `yaml:"shares"`
}

// VGPUSpec makes the card a vGPU host's: count vGPU instances of one type,
// each with 1/count of the card's memory; a slot's VM runs while a holder
// holds it.
type VGPUSpec struct {
	Type  string `yaml:"type"` // e.g. A16-1Q
	Count int    `yaml:"count"`
}

// SharesSpec shares the card between pods: HAMi (count shares of mem_mb
// MiB and cores % each) or time-slicing (count replicas).
type SharesSpec struct {
	Kind  string `yaml:"kind"` // hami | timeslice
	Count int    `yaml:"count"`
	MemMB int64  `yaml:"mem_mb"` // hami: nvidia.com/gpumem
	Cores int    `yaml:"cores"`  // hami: nvidia.com/gpucores (0: not set)
}

// slots is how many holders the card takes by slot (0: a whole card).
func (g *GPUSpec) slots() int {
	switch {
	case len(g.MIG) > 0:
		return len(g.MIG)
	case g.VGPU != nil:
		return g.VGPU.Count
	case g.Shares != nil:
		return g.Shares.Count
	}
	return 0
}

// validate checks the card's sharing.
func (g *GPUSpec) validate(add func(format string, a ...any)) {
	n := 0
	for _, set := range []bool{len(g.MIG) > 0, g.VGPU != nil, g.Shares != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		add("a GPU has one of mig, vgpu or shares")
	}
	if v := g.VGPU; v != nil && (v.Type == "" || v.Count < 1 || v.Count > 64) {
		add("vgpu: want a type and a count of 1..64")
	}
	if sh := g.Shares; sh != nil {
		switch {
		case sh.Kind != "hami" && sh.Kind != "timeslice":
			add("shares: kind %q: want hami or timeslice", sh.Kind)
		case sh.Count < 1 || sh.Count > 128:
			add("shares: want a count of 1..128")
		case sh.Kind == "hami" && sh.MemMB <= 0:
			add("shares: hami needs mem_mb")
		case sh.Cores < 0 || sh.Cores > 100:
			add("shares: cores: want 0..100")
		}
	}
}

// Behaviours a holder can script.
const (
	Training  = "training"  // busy: high utilisation, memory nearly full, two processes
	Notebook  = "notebook"  // busy for active_for, then left open: one idle process
	Jobs      = "jobs"      // short jobs: held only while a job runs
	Abandoned = "abandoned" // held, nothing runs: a slice nobody released
)

// HolderSpec is a scripted holder of one instance.
type HolderSpec struct {
	Name      string   `yaml:"name"`
	Project   string   `yaml:"project"`
	User      string   `yaml:"user"`
	Instance  string   `yaml:"instance"`  // node/gpu[/slot]; slot omitted for a whole card
	Behaviour string   `yaml:"behaviour"` // training | notebook | jobs | abandoned
	Start     Duration `yaml:"start"`     // offset from the start of the simulation
	Duration  Duration `yaml:"duration"`  // length of the window; 0: until the end
	Every     Duration `yaml:"every"`     // repeat the window with this period; 0: once
	ActiveFor Duration `yaml:"active_for"`
	JobEvery  Duration `yaml:"job_every"`
	JobLength Duration `yaml:"job_length"`

	line            int
	node            string
	gpu, slot       int
	hasSlot         bool
	activeFor       time.Duration
	jobEvery, jobLn time.Duration
}

// Duration is a time.Duration written as "90s", "2h", "1h30m" or "3d".
type Duration time.Duration

// UnmarshalYAML parses a duration and names the line on error.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: duration: %w", n.Line, err)
	}
	v, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return 0, nil
	}
	bad := fmt.Errorf("duration %q: want e.g. 90s, 2h, 3d, 2d14h", s)
	var days time.Duration
	if d, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 3660 {
			return 0, bad
		}
		days, s = time.Duration(n)*24*time.Hour, rest
		if s == "" {
			return days, nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, bad
	}
	return days + v, nil
}

// Load reads and validates a fleet file.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read fleet file: %w", err)
	}
	spec, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// Parse decodes a fleet file strictly (unknown keys fail, with their line) and
// validates it.
func Parse(data []byte) (*Spec, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var spec Spec
	sd := yaml.NewDecoder(bytes.NewReader(data))
	sd.KnownFields(true)
	if err := sd.Decode(&spec); err != nil {
		return nil, fmt.Errorf("invalid fleet file: %w", err)
	}
	// Remember lines for validation messages.
	recordLines(&root, &spec)
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

// recordLines remembers the line of each node and holder, for Validate's
// messages. The strict decode has reported every unknown or repeated key.
func recordLines(root *yaml.Node, spec *Spec) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return
	}
	reported := func(*yaml.Node, string, string, ...any) {}
	yamlwalk.Mapping(root.Content[0], "", nil, reported, func(k, val *yaml.Node, _ string) {
		for j, item := range val.Content {
			switch {
			case k.Value == "nodes" && j < len(spec.Nodes):
				spec.Nodes[j].line = item.Line
			case k.Value == "holders" && j < len(spec.Holders):
				spec.Holders[j].line = item.Line
			}
		}
	})
}

// Validate checks the whole spec and reports every problem at once.
func (s *Spec) Validate() error {
	var errs []error
	add := func(line int, format string, a ...any) {
		errs = append(errs, fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, a...)))
	}
	if s.Interval != 0 && (time.Duration(s.Interval) < time.Second || time.Duration(s.Interval) > time.Hour) {
		errs = append(errs, fmt.Errorf("interval %v: want 1s..1h", time.Duration(s.Interval)))
	}
	if len(s.Nodes) == 0 {
		errs = append(errs, errors.New("nodes: at least one node is required"))
	}
	nodes := map[string]*NodeSpec{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		switch {
		case n.Name == "":
			add(n.line, "node: name is required")
		case strings.Contains(n.Name, "/"):
			add(n.line, "node %q: name must not contain '/'", n.Name)
		case nodes[n.Name] != nil:
			add(n.line, "node %q: duplicate name", n.Name)
		}
		nodes[n.Name] = n
		if !validModel(n.Model) {
			add(n.line, "node %q: model %q: want one of %v", n.Name, n.Model, nvmlmock.Models())
		}
		if len(n.GPUs) == 0 || len(n.GPUs) > 16 {
			add(n.line, "node %q: want 1..16 gpus", n.Name)
		}
		for gi := range n.GPUs {
			n.GPUs[gi].validate(func(format string, a ...any) {
				add(n.line, "node %q: GPU %d: %s", n.Name, gi, fmt.Sprintf(format, a...))
			})
		}
	}
	for i := range s.Holders {
		h := &s.Holders[i]
		h.validate(func(format string, a ...any) { add(h.line, format, a...) })
		h.place(nodes, func(format string, a ...any) { add(h.line, format, a...) })
	}
	return errors.Join(errs...)
}

// validate checks the holder's script and sets its defaults.
func (h *HolderSpec) validate(add func(format string, a ...any)) {
	if h.Project == "" {
		add("holder %q: project is required", h.Name)
	}
	switch h.Behaviour {
	case Training, Notebook, Jobs, Abandoned:
	default:
		add("holder %q: behaviour %q: want training, notebook, jobs or abandoned", h.Name, h.Behaviour)
	}
	if h.Every != 0 && (h.Duration == 0 || h.Duration > h.Every) {
		add("holder %q: with every, duration must be set and at most every", h.Name)
	}
	h.activeFor = time.Duration(h.ActiveFor)
	if h.activeFor == 0 {
		h.activeFor = 45 * time.Minute
	}
	h.jobEvery, h.jobLn = time.Duration(h.JobEvery), time.Duration(h.JobLength)
	if h.jobEvery == 0 {
		h.jobEvery = time.Hour
	}
	if h.jobLn == 0 {
		h.jobLn = 10 * time.Minute
	}
	if h.jobLn > h.jobEvery {
		add("holder %q: job_length must be at most job_every", h.Name)
	}
}

// place resolves the holder's instance (node/gpu[/slot]) among nodes.
func (h *HolderSpec) place(nodes map[string]*NodeSpec, add func(format string, a ...any)) {
	parts := strings.Split(h.Instance, "/")
	if len(parts) < 2 || len(parts) > 3 {
		add("holder %q: instance %q: want node/gpu or node/gpu/slot", h.Name, h.Instance)
		return
	}
	h.node = parts[0]
	n := nodes[h.node]
	if n == nil {
		add("holder %q: instance %q: no node %q", h.Name, h.Instance, h.node)
		return
	}
	g, err := strconv.Atoi(parts[1])
	if err != nil || g < 0 || g >= len(n.GPUs) {
		add("holder %q: instance %q: node %q has GPUs 0..%d", h.Name, h.Instance, h.node, len(n.GPUs)-1)
		return
	}
	h.gpu = g
	slots := n.GPUs[g].slots()
	if len(parts) == 3 {
		sl, err := strconv.Atoi(parts[2])
		if err != nil || sl < 0 || sl >= slots {
			add("holder %q: instance %q: GPU %d has %d slots (MIG, vGPU or shares)", h.Name, h.Instance, g, slots)
			return
		}
		h.slot, h.hasSlot = sl, true
	} else if slots > 0 {
		add("holder %q: instance %q: GPU %d is split (MIG, vGPU or shares): name the slot (node/gpu/slot)", h.Name, h.Instance, g)
	}
}

func validModel(m string) bool {
	for _, k := range nvmlmock.Models() {
		if k == m {
			return true
		}
	}
	return false
}
