package deploytest

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing/export"
)

func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	dir := filepath.Join(root(t), "deployments/compose")
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
		Environment: env,
	}, loader.WithProfiles([]string{"*"}), func(o *loader.Options) { o.SetProjectName("cardhour", true) })
	require.NoError(t, err)
	return p
}

// The single-host trial: every service present, on the expected images, each
// with a health check and a non-root user; the cardhour services on the
// project's image, started in dependency order, with no capabilities.
func TestCompose(t *testing.T) {
	p := loadCompose(t, map[string]string{"CLICKHOUSE_PASSWORD": "s3cret-ch", "POSTGRES_PASSWORD": "s3cret-pg"})
	names := p.ServiceNames()
	slices.Sort(names)
	require.Equal(t, []string{"clickhouse", "collector", "grafana", "ingest", "kafka", "postgres", "prometheus", "serve"}, names)

	images := map[string]string{
		"kafka": "apache/kafka:", "clickhouse": "clickhouse/clickhouse-server:", "postgres": "postgres:",
		"ingest": "cardhour/cardhour:", "serve": "cardhour/cardhour:", "collector": "cardhour/cardhour:",
		"prometheus": "prom/prometheus:", "grafana": "grafana/grafana:",
	}
	for name, s := range p.Services {
		require.True(t, strings.HasPrefix(s.Image, images[name]), "%s: image %s", name, s.Image)
		require.NotNil(t, s.HealthCheck, "%s: no health check", name)
		require.False(t, s.HealthCheck.Disable, name)
		require.NotEmpty(t, s.HealthCheck.Test, name)
		require.Contains(t, []string{"CMD", "CMD-SHELL"}, s.HealthCheck.Test[0], name)
		require.NotEmpty(t, s.User, "%s: no user", name)
		uid, _, _ := strings.Cut(s.User, ":")
		require.NotContains(t, []string{"0", "root", ""}, uid, "%s runs as root", name)
		for _, port := range s.Ports {
			require.Equal(t, "127.0.0.1", port.HostIP, "%s publishes %s beyond loopback", name, port.Published)
		}
		for _, dep := range s.DependsOn {
			require.Equal(t, "service_healthy", dep.Condition, name)
		}
	}
	for _, name := range []string{"ingest", "serve", "collector"} {
		s := p.Services[name]
		require.NotNil(t, s.Build, name)
		require.Equal(t, "deployments/docker/Dockerfile", s.Build.Dockerfile, name)
		require.Equal(t, "cardhour", s.Build.Target, name)
		require.Equal(t, root(t), s.Build.Context, name)
		require.True(t, s.ReadOnly, name)
		require.Equal(t, []string{"ALL"}, s.CapDrop, name)
		require.Contains(t, s.SecurityOpt, "no-new-privileges:true", name)
		require.Equal(t, []string{"CMD", "/usr/local/bin/cardhour", "probe", "--url"}, []string(s.HealthCheck.Test[:4]), name)
	}
	require.Equal(t, "ingest", p.Services["ingest"].Command[0])
	require.Equal(t, "serve", p.Services["serve"].Command[0])
	require.Equal(t, "collect", p.Services["collector"].Command[0])
	require.Contains(t, p.Services["collector"].Command, "--simulate=/etc/cardhour/fleet.yaml")

	// Published: serve only (and Grafana in the monitoring profile).
	var published []string
	for name, s := range p.Services {
		for _, port := range s.Ports {
			published = append(published, name+":"+port.Published+"->"+strconv.Itoa(int(port.Target)))
		}
	}
	slices.Sort(published)
	require.Equal(t, []string{"grafana:3000->3000", "serve:8080->8080"}, published)

	// Kafka in KRaft mode, no ZooKeeper.
	k := p.Services["kafka"].Environment
	require.Equal(t, "broker,controller", *k["KAFKA_PROCESS_ROLES"])
	require.Equal(t, "1@kafka:9093", *k["KAFKA_CONTROLLER_QUORUM_VOTERS"])
	for key := range k {
		require.NotContains(t, key, "ZOOKEEPER")
	}

	// Passwords come from the environment into every DSN.
	require.Contains(t, p.Services["ingest"].Command, "--store=clickhouse://cardhour:s3cret-ch@clickhouse:9000/cardhour")
	require.Contains(t, p.Services["serve"].Command, "--state=postgres://cardhour:s3cret-pg@postgres:5432/cardhour?sslmode=disable")
	require.Equal(t, "s3cret-ch", *p.Services["clickhouse"].Environment["CLICKHOUSE_PASSWORD"])

	// Dependencies: ingest waits for Kafka and ClickHouse, serve for ingest
	// (the schema) and PostgreSQL.
	require.ElementsMatch(t, []string{"kafka", "clickhouse"}, slices.Collect(mapKeys(p.Services["ingest"].DependsOn)))
	require.ElementsMatch(t, []string{"ingest", "postgres"}, slices.Collect(mapKeys(p.Services["serve"].DependsOn)))

	// The files the services mount exist.
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				_, err := os.Stat(v.Source)
				require.NoError(t, err, "%s mounts %s", name, v.Source)
				require.True(t, v.ReadOnly, "%s mounts %s writable", name, v.Source)
			}
		}
	}
	prom, err := os.ReadFile(filepath.Join(root(t), "deployments/compose/prometheus.yml"))
	require.NoError(t, err)
	for _, target := range []string{"collector:9464", "ingest:9464", "serve:8080"} {
		require.Contains(t, string(prom), target)
	}
}

func mapKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// The Dockerfile builds in a Go stage and ships two runtime stages: cardhour
// as the distroless non-root user, the collector as root (the chart drops its
// capabilities); the compose services' target exists.
func TestDockerfile(t *testing.T) {
	f, err := os.Open(filepath.Join(root(t), "deployments/docker/Dockerfile"))
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read-only
	type stage struct{ from, user, entrypoint string }
	stages := map[string]*stage{}
	var order []string
	var cur *stage
	fromRE := regexp.MustCompile(`^FROM\s+(\S+)\s+AS\s+(\S+)$`)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "FROM "):
			m := fromRE.FindStringSubmatch(line)
			require.NotNil(t, m, "line %d: a FROM without AS name: %s", n, line)
			cur = &stage{from: m[1]}
			stages[m[2]] = cur
			order = append(order, m[2])
		case strings.HasPrefix(line, "USER "):
			require.NotNil(t, cur, "line %d", n)
			cur.user = strings.TrimSpace(strings.TrimPrefix(line, "USER "))
		case strings.HasPrefix(line, "ENTRYPOINT "):
			cur.entrypoint = strings.TrimPrefix(line, "ENTRYPOINT ")
		}
	}
	require.NoError(t, sc.Err())
	// fonts: the PDF font set (docs/exports.md), copied into the cardhour image.
	require.Equal(t, []string{"build", "fonts", "cardhour", "cardhour-collector"}, order)
	// The cardhour image ships a file of every role of the PDF font set.
	df, err := os.ReadFile(filepath.Join(root(t), "deployments/docker/Dockerfile"))
	require.NoError(t, err)
	for _, role := range export.DefaultFonts {
		shipped := false
		for _, p := range role.Paths {
			shipped = shipped || strings.Contains(string(df), "COPY --from=fonts "+p+" ")
		}
		require.True(t, shipped, "the image ships no %s font (%s)", role.Role, role.Package)
	}
	require.True(t, strings.HasPrefix(stages["build"].from, "golang:1.26"), stages["build"].from)
	require.Equal(t, "65532:65532", stages["cardhour"].user)
	require.True(t, strings.HasSuffix(stages["cardhour"].from, ":nonroot"), stages["cardhour"].from)
	require.Equal(t, "0:0", stages["cardhour-collector"].user)
	for _, s := range []string{"cardhour", "cardhour-collector"} {
		require.Equal(t, `["/usr/local/bin/cardhour"]`, stages[s].entrypoint, s)
		require.True(t, strings.HasPrefix(stages[s].from, "gcr.io/distroless/"), s)
	}
	// The users the compose file and the chart run the images with.
	p := loadCompose(t, nil)
	require.Equal(t, stages["cardhour"].user, p.Services["serve"].User)
	vals, err := os.ReadFile(filepath.Join(root(t), "deployments/helm/cardhour/values.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(vals), "runAsUser: 65532")
}
