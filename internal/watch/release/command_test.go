package release_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// The test binary doubles as a release program: with CARDHOUR_TEST_HELPER set
// it prints its arguments and environment, floods stderr, and exits as told.
func TestMain(m *testing.M) {
	if mode := os.Getenv("CARDHOUR_TEST_HELPER"); mode != "" {
		fmt.Printf("args=%q key=%s ref=%s since=%s samples=%s\n", os.Args[1:], os.Getenv("CARDHOUR_RELEASE_KEY"),
			os.Getenv("CARDHOUR_HOLDER_REF"), os.Getenv("CARDHOUR_IDLE_SINCE"), os.Getenv("CARDHOUR_IDLE_SAMPLES"))
		switch mode {
		case "flood":
			fmt.Fprint(os.Stderr, strings.Repeat("e", 10000))
			os.Exit(3)
		case "hang":
			time.Sleep(time.Minute)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func slurmRequest(ref string, dry bool) alert.ReleaseRequest {
	r := kubeRequest(ref, dry)
	r.Target.Project = "hpc-lab"
	return r
}

func TestCommandRunsWithoutAShell(t *testing.T) {
	ctx := context.Background()
	c := release.NewCommand(release.CommandConfig{Argv: []string{"/bin/echo", "--job={slurm_job}", "{node};rm -rf /", "$HOME", "{user}@{project}"}})
	argv, err := c.Argv(slurmRequest("slurm:812345", false))
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/echo", "--job=812345", "gpu-01;rm -rf /", "$HOME", "alice@hpc-lab"}, argv)

	// Dry run: records what it would run, runs nothing.
	out, err := c.Release(ctx, slurmRequest("slurm:812345", true))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Action: `dry run: would run /bin/echo --job=812345 "gpu-01;rm -rf /" "$HOME" alice@hpc-lab`}, out)

	// The real run: arguments reach the program verbatim (no shell expands them).
	out, err = c.Release(ctx, slurmRequest("slurm:812345", false))
	require.NoError(t, err)
	require.Equal(t, alert.ReleaseOutcome{Released: true,
		Action: `ran /bin/echo --job=812345 "gpu-01;rm -rf /" "$HOME" alice@hpc-lab; stdout: --job=812345 gpu-01;rm -rf / $HOME alice@hpc-lab: exit 0`}, out)

	// No Slurm job in the reference: nothing to act on, nothing run.
	for _, ref := range []string{"", "pid:42", "k8s:nlp-lab/nb"} {
		_, err = c.Release(ctx, slurmRequest(ref, false))
		require.ErrorIs(t, err, release.ErrNoHandle, ref)
		require.ErrorContains(t, err, "{slurm_job} empty")
	}
	// Pod placeholders from a Kubernetes reference; pid from a process one.
	k := release.NewCommand(release.CommandConfig{Argv: []string{"kubectl", "delete", "pod", "-n", "{namespace}", "{pod}"}})
	argv, err = k.Argv(slurmRequest("k8s:nlp-lab/nb-0", false))
	require.NoError(t, err)
	require.Equal(t, []string{"kubectl", "delete", "pod", "-n", "nlp-lab", "nb-0"}, argv)
	p := release.NewCommand(release.CommandConfig{Argv: []string{"/usr/local/sbin/kill-on-node", "{node}", "{pid}", "{gpu_uuid}", "{instance}"}})
	argv, err = p.Argv(slurmRequest("pid:4242", false))
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/sbin/kill-on-node", "gpu-01", "4242", "GPU-1", "MIG-a"}, argv)
}

func TestCommandFailuresAndOutput(t *testing.T) {
	ctx := context.Background()
	self, err := os.Executable()
	require.NoError(t, err)

	out, err := release.NewCommand(release.CommandConfig{Argv: []string{"/bin/false"}}).Release(ctx, slurmRequest("slurm:1", false))
	require.ErrorContains(t, err, "exit status 1")
	require.False(t, release.Permanent(err))
	require.Equal(t, alert.ReleaseOutcome{Action: "ran /bin/false"}, out)

	_, err = release.NewCommand(release.CommandConfig{Argv: []string{"/nonexistent/scancel", "{slurm_job}"}}).Release(ctx, slurmRequest("slurm:1", false))
	require.ErrorContains(t, err, "/nonexistent/scancel")

	// The program sees the evidence in its environment; output is bounded.
	t.Setenv("CARDHOUR_TEST_HELPER", "flood")
	out, err = release.NewCommand(release.CommandConfig{Argv: []string{self, "{slurm_job}"}, MaxOutput: 100}).Release(ctx, slurmRequest("slurm:77", false))
	require.ErrorContains(t, err, "exit status 3")
	require.False(t, out.Released)
	require.Contains(t, out.Action, `stdout: args=["77"] key=MIG-a|1793491200000 ref=slurm:77 since=2026-11-01T00:00:00Z samples=1440`)
	require.Contains(t, out.Action, "stderr: "+strings.Repeat("e", 100)+" … (9900 more bytes)")
	require.Less(t, len(out.Action), 600)

	// A program that hangs is killed at the timeout.
	t.Setenv("CARDHOUR_TEST_HELPER", "hang")
	start := time.Now()
	out, err = release.NewCommand(release.CommandConfig{Argv: []string{self}, Timeout: 300 * time.Millisecond}).Release(ctx, slurmRequest("slurm:1", false))
	require.ErrorContains(t, err, "did not finish within 300ms and was killed")
	require.False(t, out.Released)
	require.Less(t, time.Since(start), 30*time.Second)
}

func TestCommandConfigValidate(t *testing.T) {
	for argv, want := range map[string]string{
		"":                      "a program is required",
		"{slurm_job}":           "may not hold a placeholder",
		"scancel {job}":         "unknown placeholder {job}",
		"scancel {slurm_job} {": "", // a lone brace is literal
	} {
		err := release.CommandConfig{Argv: strings.Fields(argv)}.Validate()
		if want == "" {
			require.NoError(t, err, argv)
			continue
		}
		require.ErrorContains(t, err, want, argv)
		// A releaser built from it refuses every request.
		_, err = release.NewCommand(release.CommandConfig{Argv: strings.Fields(argv)}).Release(context.Background(), slurmRequest("slurm:1", true))
		require.ErrorContains(t, err, want)
	}
}
