package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cardhour/cardhour/internal/watch/alert"
)

// Placeholders are the names an argv template may use, each as {name}:
// slurm_job, pod and namespace come from the holder reference, pid too
// ("pid:<pid>"), the others from the target.
var Placeholders = []string{"slurm_job", "pod", "namespace", "pid", "node", "instance", "project", "user", "gpu_uuid"}

// CommandConfig configures a command releaser.
type CommandConfig struct {
	// Argv is the program and its arguments; arguments may hold placeholders
	// ({slurm_job}, "--job={slurm_job}"), the program may not. The command is
	// run directly, never through a shell.
	Argv []string
	// Timeout bounds one run (default 30 s); the process is killed past it.
	Timeout time.Duration
	// MaxOutput bounds the stdout and stderr kept for the Action, each
	// (default 4 KiB).
	MaxOutput int
}

var placeholderRe = regexp.MustCompile(`\{([^{}]*)\}`)

// Validate reports an empty argv, a placeholder in the program or an unknown one.
func (c CommandConfig) Validate() error {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return errors.New("argv: a program is required")
	}
	if placeholderRe.MatchString(c.Argv[0]) {
		return fmt.Errorf("argv: the program %q may not hold a placeholder", c.Argv[0])
	}
	for i, a := range c.Argv[1:] {
		for _, m := range placeholderRe.FindAllStringSubmatch(a, -1) {
			if !isPlaceholder(m[1]) {
				return fmt.Errorf("argv[%d] %q: unknown placeholder {%s} (known: {%s})", i+1, a, m[1], strings.Join(Placeholders, "}, {"))
			}
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("timeout %v: must not be negative", c.Timeout)
	}
	if c.MaxOutput < 0 {
		return fmt.Errorf("max_output_bytes %d: must not be negative", c.MaxOutput)
	}
	return nil
}

func isPlaceholder(name string) bool {
	for _, p := range Placeholders {
		if p == name {
			return true
		}
	}
	return false
}

// Command runs a program to release, e.g. ["scancel", "{slurm_job}"].
type Command struct {
	cfg CommandConfig
	err error // from Validate: every Release fails with it
}

// NewCommand returns a command releaser. A config that does not validate makes
// every Release fail (ParseConfig reports it first, with its line).
func NewCommand(cfg CommandConfig) *Command {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxOutput == 0 {
		cfg.MaxOutput = 4 << 10
	}
	return &Command{cfg: cfg, err: cfg.Validate()}
}

// Argv fills the template for r. A placeholder the request has no value for
// is an error wrapping ErrNoHandle (scancel without a Slurm job).
func (c *Command) Argv(r alert.ReleaseRequest) ([]string, error) {
	if c.err != nil {
		return nil, fmt.Errorf("command release: %w", c.err)
	}
	ref := ParseRef(r.Target.HolderRef)
	t := r.Target
	values := map[string]string{"slurm_job": ref.SlurmJob, "pod": ref.Pod, "namespace": ref.Namespace, "pid": ref.PID,
		"node": t.Node, "instance": t.InstanceID, "project": t.Project, "user": t.User, "gpu_uuid": t.GPUUUID}
	out := make([]string, len(c.cfg.Argv))
	out[0] = c.cfg.Argv[0]
	var missing []string
	for i, a := range c.cfg.Argv[1:] {
		out[i+1] = placeholderRe.ReplaceAllStringFunc(a, func(m string) string {
			name := m[1 : len(m)-1]
			v := values[name]
			if v == "" {
				missing = append(missing, m)
			}
			return v
		})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("command release of %s: %s empty for holder reference %q: %w",
			t.InstanceID, strings.Join(missing, ", "), t.HolderRef, ErrNoHandle)
	}
	return out, nil
}

// Release runs the command (a dry run only records the argv). Released is
// true when it exits 0; a non-zero exit, a timeout or a program that cannot
// start is an error, with the output captured in the error and the Action.
func (c *Command) Release(ctx context.Context, r alert.ReleaseRequest) (alert.ReleaseOutcome, error) {
	argv, err := c.Argv(r)
	if err != nil {
		return alert.ReleaseOutcome{}, err
	}
	shown := quoteArgv(argv)
	if r.DryRun {
		return alert.ReleaseOutcome{Action: "dry run: would run " + shown}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // G204: argv from the operator's config, no shell
	cmd.Env = append(os.Environ(),
		"CARDHOUR_RELEASE_KEY="+r.Key,
		"CARDHOUR_HOLDER_REF="+r.Target.HolderRef,
		"CARDHOUR_IDLE_SINCE="+r.Evidence.StreakStart.UTC().Format(time.RFC3339),
		"CARDHOUR_IDLE_SAMPLES="+strconv.Itoa(r.Evidence.IdleSamples))
	stdout, stderr := &capped{max: c.cfg.MaxOutput}, &capped{max: c.cfg.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second // a child that keeps the pipes open does not hold us
	err = cmd.Run()
	action := "ran " + shown + outputs(stdout, stderr)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return alert.ReleaseOutcome{Action: action}, fmt.Errorf("command release: %s did not finish within %v and was killed%s", shown, c.cfg.Timeout, outputs(stdout, stderr))
	case err != nil:
		return alert.ReleaseOutcome{Action: action}, fmt.Errorf("command release: %s: %w%s", shown, err, outputs(stdout, stderr))
	}
	return alert.ReleaseOutcome{Released: true, Action: action + ": exit 0"}, nil
}

func outputs(stdout, stderr *capped) string {
	var b strings.Builder
	if s := stdout.String(); s != "" {
		b.WriteString("; stdout: " + s)
	}
	if s := stderr.String(); s != "" {
		b.WriteString("; stderr: " + s)
	}
	return b.String()
}

// quoteArgv shows an argv as a shell would need it written (for people only).
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
		c.dropped += int64(len(p) - min(room, len(p)))
	} else {
		c.dropped += int64(len(p))
	}
	return len(p), nil
}

func (c *capped) String() string {
	s := strings.TrimSpace(strings.ToValidUTF8(c.buf.String(), "\uFFFD"))
	if c.dropped > 0 {
		s += fmt.Sprintf(" … (%d more bytes)", c.dropped)
	}
	return s
}
