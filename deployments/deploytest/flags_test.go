package deploytest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cardhour/cardhour/ingest"
	"github.com/cardhour/cardhour/schemas"
)

// flagsOf runs `cardhour CMD -h` and returns the flag names it lists.
func flagsOf(t *testing.T, bin, cmd string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, cmd, "-h").CombinedOutput() // -h exits 0 or 2 by command
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		names[m[1]] = true
	}
	require.NotEmpty(t, names, "cardhour %s -h listed no flags:\n%s", cmd, out)
	return names
}

// requireFlags checks that every --flag of args (a cardhour command line,
// args[0] the subcommand) is one the subcommand has.
func requireFlags(t *testing.T, where string, known map[string]map[string]bool, args []string) {
	t.Helper()
	require.NotEmpty(t, args, where)
	flags, ok := known[args[0]]
	require.True(t, ok, "%s: unknown cardhour command %q", where, args[0])
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		require.True(t, flags[name], "%s: cardhour %s has no flag --%s", where, args[0], name)
	}
}

// The command lines of the chart (default and example values), the compose
// file and the systemd units use only flags the commands have, and the
// chart's defaults are the commands' own (topic, consumer group, dead letters).
func TestCommandLinesUseRealFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cardhour")
	}
	bin := filepath.Join(t.TempDir(), "cardhour")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cardhour")
	build.Dir = root(t)
	build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	known := map[string]map[string]bool{}
	for _, c := range []string{"collect", "ingest", "serve", "migrate", "probe", "standalone"} {
		known[c] = flagsOf(t, bin, c)
	}

	containers := func(o *objects) map[string]corev1.Container {
		out := map[string]corev1.Container{}
		for n, d := range o.daemonSets {
			out[n] = d.Spec.Template.Spec.Containers[0]
		}
		for n, d := range o.deployments {
			out[n] = d.Spec.Template.Spec.Containers[0]
		}
		return out
	}
	def := renderDecode(t)
	for n, c := range containers(def) {
		requireFlags(t, "chart "+n, known, c.Args)
	}
	for n, c := range containers(renderDecode(t, exampleArgs(t)...)) {
		requireFlags(t, "chart (example values) "+n, known, c.Args)
	}
	in := def.deployments[fullname+"-ingest"].Spec.Template.Spec.Containers[0]
	for flag, want := range map[string]string{"--topic=": schemas.SampleTopicV1, "--group=": ingest.DefaultGroupID, "--dlq-topic=": ingest.DefaultDLQTopic} {
		got, _ := arg(in, flag)
		require.Equal(t, want, got, "chart default %s", flag)
	}
	col := def.daemonSets[fullname+"-collector"].Spec.Template.Spec.Containers[0]
	got, _ := arg(col, "--topic=")
	require.Equal(t, schemas.SampleTopicV1, got)

	for name, s := range loadCompose(t, nil).Services {
		if strings.HasPrefix(s.Image, "cardhour/") {
			requireFlags(t, "compose "+name, known, s.Command)
			requireFlags(t, "compose "+name+" health check", known, s.HealthCheck.Test[2:])
		}
	}

	units, err := filepath.Glob(filepath.Join(root(t), "deployments/systemd/*.service"))
	require.NoError(t, err)
	require.NotEmpty(t, units)
	for _, u := range units {
		f, err := os.Open(u)
		require.NoError(t, err)
		var line strings.Builder
		sc := bufio.NewScanner(f)
		inExec := false
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(l, "ExecStart=") {
				inExec = true
				l = strings.TrimPrefix(l, "ExecStart=")
			}
			if !inExec {
				continue
			}
			line.WriteString(strings.TrimSuffix(l, `\`) + " ")
			if !strings.HasSuffix(l, `\`) {
				break
			}
		}
		_ = f.Close()
		fields := strings.Fields(line.String())
		require.GreaterOrEqual(t, len(fields), 2, u)
		requireFlags(t, filepath.Base(u), known, fields[1:])
	}
}
