// Package gen writes synthetic cardhour.sample.v1 traces: a fleet of A100 and H100
// MIG instances and whole cards, held by projects and users in sessions of varied
// length, with idle stretches, missed samples, duplicates and unheld time. It is
// deterministic for a seed, so benchmarks and tests can regenerate the same file.
package gen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/cardhour/cardhour/schemas"
)

// Config sizes a trace.
type Config struct {
	Samples    int64 // total sample lines to write (approximately: whole time steps)
	StartMS    int64 // first sample time, Unix ms
	IntervalMS int64 // sampling interval (default 10 000)
	Instances  int   // fleet size in instances (default 64: one 8-GPU node, 7 MIG + 1 whole card each)
	Seed       uint64
	Projects   []string // default: the example catalog's projects and one that is not in it
	Users      int      // users per project, default 8
	// DuplicateEvery writes every n-th sample twice (a replay), 0 for none.
	DuplicateEvery int
	// EndMS, when positive, ends the trace before the first time step
	// starting at or after it, even if fewer than Samples were written:
	// the instances' latest samples then start in the last step before it
	// (but where that step's sample was lost).
	EndMS int64
}

type instance struct {
	node, gpuUUID, model, id, profile string
	memTotal                          int64

	// Current holder and state.
	project, user string
	busy          bool
	left          int64 // steps left in the current state
	held          bool
}

var layouts = []struct {
	model   string
	mem     int64
	profile []string
}{
	{"NVIDIA A100-SXM4-80GB", 80 << 30, []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}},
	{"NVIDIA A100-SXM4-80GB", 80 << 30, []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
	{"NVIDIA H100 80GB HBM3", 80 << 30, []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb"}},
	{"NVIDIA A100-SXM4-80GB", 80 << 30, []string{"full"}},
}

// Write writes the trace to w and returns the number of lines written.
func Write(w io.Writer, cfg Config) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var buf []byte
	written, err := Each(cfg, func(s *schemas.Sample) error {
		buf = s.AppendJSON(buf[:0])
		buf = append(buf, '\n')
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return written, err
	}
	return written, bw.Flush()
}

// Each calls fn with the samples Write would write, in the same order (the
// sample is reused: fn must copy what it keeps), and returns how many it
// passed, or fn's first error.
func Each(cfg Config, fn func(*schemas.Sample) error) (int64, error) {
	if cfg.IntervalMS <= 0 {
		cfg.IntervalMS = 10_000
	}
	if cfg.Instances <= 0 {
		cfg.Instances = 64
	}
	if len(cfg.Projects) == 0 {
		cfg.Projects = []string{"nlp-lab", "cv-lab", "ai101", "thesis-h100", "guest-lab"}
	}
	if cfg.Users <= 0 {
		cfg.Users = 8
	}
	// Deterministic on purpose: the same seed must give the same trace.
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)) //nolint:gosec // G404: not for secrets
	var fleet []*instance
	for gpu := 0; len(fleet) < cfg.Instances; gpu++ {
		l := layouts[gpu%len(layouts)]
		node := fmt.Sprintf("gpu-node-%02d", gpu/8)
		uuid := fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", gpu, cfg.Seed)
		for j, prof := range l.profile {
			if len(fleet) == cfg.Instances {
				break
			}
			id := uuid
			if prof != "full" {
				id = fmt.Sprintf("MIG-%08x-%04x-4000-8000-%012x", gpu, j, cfg.Seed)
			}
			fleet = append(fleet, &instance{node: node, gpuUUID: uuid, model: l.model, id: id, profile: prof,
				memTotal: l.mem / int64(len(l.profile))})
		}
	}
	var written int64
	var s schemas.Sample
	for step := int64(0); written < cfg.Samples; step++ {
		ts := cfg.StartMS + step*cfg.IntervalMS
		if cfg.EndMS > 0 && ts >= cfg.EndMS {
			break
		}
		for _, in := range fleet {
			if written >= cfg.Samples {
				break
			}
			advance(in, rng, cfg)
			// Now and then a sample is lost (collector restart): a gap in the session.
			if in.held && rng.IntN(500) == 0 {
				continue
			}
			s = schemas.Sample{
				StartMS: ts, IntervalMS: cfg.IntervalMS, Node: in.node, GPUUUID: in.gpuUUID,
				GPUModel: in.model, InstanceID: in.id, Profile: in.profile, MemTotal: in.memTotal,
			}
			if in.held {
				s.Project, s.User = in.project, in.user
				if in.busy {
					s.Processes = 1 + int64(rng.IntN(2))
					s.MemUsed = in.memTotal / 2
				}
			}
			// MIG instances have no utilisation in NVML (null) except on H100 (GPM).
			if in.profile == "full" || in.model == "NVIDIA H100 80GB HBM3" {
				s.UtilKnown = true
				if in.held && in.busy {
					s.Util = float64(50+rng.IntN(50)) / 100
				} else {
					s.Util = float64(rng.IntN(3)) / 100
				}
			}
			if err := fn(&s); err != nil {
				return written, err
			}
			written++
			if cfg.DuplicateEvery > 0 && written%int64(cfg.DuplicateEvery) == 0 && written < cfg.Samples {
				if err := fn(&s); err != nil {
					return written, err
				}
				written++
			}
		}
	}
	return written, nil
}

// advance moves an instance's holder state machine one step: held sessions last
// from minutes to days, with busy and idle stretches; free time in between.
func advance(in *instance, rng *rand.Rand, cfg Config) {
	if in.left > 0 {
		in.left--
		if in.held && rng.IntN(360) == 0 {
			in.busy = !in.busy // switch between training and a notebook left open
		}
		return
	}
	if in.held {
		in.held = false
		in.left = int64(rng.ExpFloat64() * 180) // free for ~30 min at 10 s
		return
	}
	in.held = true
	p := rng.IntN(len(cfg.Projects))
	in.project = cfg.Projects[p]
	in.user = fmt.Sprintf("2025%02d%04d", p, rng.IntN(cfg.Users))
	in.busy = rng.IntN(4) != 0
	in.left = int64(rng.ExpFloat64() * 1080) // held for ~3 h at 10 s
}
