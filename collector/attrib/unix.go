package attrib

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/cardhour/cardhour/collector"
)

// RosterFile maps Unix logins and Slurm jobs to projects and users:
//
//	logins:
//	  alice: {project: nlp-lab, user: "2023110042"}
//	jobs:
//	  "812345": {project: cv-lab, user: "2022110315"}
type RosterFile struct {
	Logins map[string]Entry `yaml:"logins"`
	Jobs   map[string]Entry `yaml:"jobs"`
}

// UnixConfig configures the Unix resolver.
type UnixConfig struct {
	Roster RosterFile
	// ProcRoot is /proc (tests pass a fake tree).
	ProcRoot string
	// LookupUID maps a uid to a login (default os/user.LookupId).
	LookupUID func(uid string) (string, error)
}

// Unix attributes an instance through its compute processes: PID → Slurm job
// (from /proc/PID/cgroup) → roster jobs, else PID → owner uid → login → roster
// logins. When processes of several owners share an instance, the one using the
// most memory wins.
type Unix struct {
	cfg UnixConfig
}

// LoadRoster reads a roster file (strict).
func LoadRoster(path string) (RosterFile, error) {
	var r RosterFile
	data, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("cannot read roster: %w", err)
	}
	if err := decodeStrict(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	for k, e := range r.Logins {
		if e.Project == "" {
			errs = append(errs, fmt.Errorf("%s: login %q: project is required", path, k))
		}
	}
	for k, e := range r.Jobs {
		if e.Project == "" {
			errs = append(errs, fmt.Errorf("%s: job %q: project is required", path, k))
		}
	}
	return r, errors.Join(errs...)
}

// NewUnix returns a Unix resolver.
func NewUnix(cfg UnixConfig) *Unix {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.LookupUID == nil {
		cfg.LookupUID = func(uid string) (string, error) {
			u, err := user.LookupId(uid)
			if err != nil {
				return "", err
			}
			return u.Username, nil
		}
	}
	return &Unix{cfg: cfg}
}

// Name is "unix".
func (u *Unix) Name() string { return "unix" }

var slurmJobRe = regexp.MustCompile(`job_(\d+)`)

// Resolve attributes each instance by its largest process.
func (u *Unix) Resolve(_ context.Context, insts []collector.Instance) (map[string]collector.Holder, error) {
	out := map[string]collector.Holder{}
	var errs []error
	for _, in := range insts {
		var best *collector.Holder
		var bestMem uint64
		for _, p := range in.Processes {
			h, err := u.holder(p.PID)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if h != nil && (best == nil || p.UsedMemory > bestMem) {
				best, bestMem = h, p.UsedMemory
			}
		}
		if best != nil {
			out[in.InstanceID] = *best
		}
	}
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more", len(errs)-3))
	}
	return out, errors.Join(errs...)
}

// holder attributes one process. Its Ref is "slurm:<jobid>" when the
// process's cgroup names a Slurm job (whether the roster knows the job or the
// login), else "pid:<pid>".
func (u *Unix) holder(pid uint32) (*collector.Holder, error) {
	dir := filepath.Join(u.cfg.ProcRoot, strconv.FormatUint(uint64(pid), 10))
	ref := "pid:" + strconv.FormatUint(uint64(pid), 10)
	if cg, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
		if m := slurmJobRe.FindSubmatch(cg); m != nil {
			ref = "slurm:" + string(m[1])
			if e, ok := u.cfg.Roster.Jobs[string(m[1])]; ok {
				return &collector.Holder{Project: e.Project, User: e.User, Ref: ref}, nil
			}
		}
	}
	uid, err := procUID(filepath.Join(dir, "status"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // the process has exited (or lives in another PID namespace)
		}
		return nil, err
	}
	login, err := u.cfg.LookupUID(uid)
	if err != nil {
		return nil, fmt.Errorf("pid %d: uid %s: %w", pid, uid, err)
	}
	if e, ok := u.cfg.Roster.Logins[login]; ok {
		return &collector.Holder{Project: e.Project, User: e.User, Ref: ref}, nil
	}
	return nil, nil
}

// procUID returns the real uid from /proc/PID/status.
func procUID(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if _, err := strconv.ParseUint(f[0], 10, 32); err == nil {
					return f[0], nil
				}
			}
			break
		}
	}
	return "", fmt.Errorf("%s: no Uid line", path)
}
