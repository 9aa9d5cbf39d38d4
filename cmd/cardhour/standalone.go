//go:build !collector

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/collector"
	"github.com/cardhour/cardhour/collector/attrib"
	"github.com/cardhour/cardhour/collector/nvmlsource"
	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// Test hooks: the NVML library the collector reads (go-nvml's mock in
// tests), the context the command runs under, and a call once it serves.
var (
	standaloneNVML    = func() nvml.Interface { return nvml.New() }
	standaloneContext = func() (context.Context, context.CancelFunc) {
		return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	}
	standaloneReady func(url string)
)

// standaloneConfig is the file of cardhour standalone.
type standaloneConfig struct {
	Store, State, Catalog, Addr, Watch string
	Node                               string
	Interval                           time.Duration
	Resolvers                          []string
	StaticMap, Roster, KubeletSocket   string
	KubeUserLabel                      string
	NamespaceProjects                  map[string]string
}

// parseStandalone reads the configuration strictly: unknown fields, wrong
// types and bad values are errors naming the file's line and the field,
// all reported at once. Relative paths are taken from the file's directory.
func parseStandalone(data []byte, name string) (*standaloneConfig, error) {
	host, _ := os.Hostname()
	c := &standaloneConfig{Addr: "127.0.0.1:8080", Node: host, Interval: 10 * time.Second, KubeletSocket: attrib.DefaultKubeletSocket}
	var errs []string
	bad := func(n *yaml.Node, field, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s:%d: %s: %s", name, n.Line, field, fmt.Sprintf(format, args...)))
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty: store and catalog are required", name)
		}
		return nil, fmt.Errorf("%s: invalid YAML: %w", name, err)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of store, state, catalog, addr, watch, collector", name, root.Line)
	}
	str := func(v *yaml.Node, field string) string {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			bad(v, field, "want a string")
			return ""
		}
		return v.Value
	}
	dir := filepath.Dir(name)
	path := func(v *yaml.Node, field string) string {
		p := str(v, field)
		if p != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p
	}
	// A field is its dotted path, wherever it is written: a key given twice
	// is reported at its second place, with the line of its first.
	seen := map[string]*yaml.Node{}
	twice := func(k *yaml.Node, field string) { bad(k, field, "given twice (also on line %d)", seen[field].Line) }
	pairs := func(m *yaml.Node, prefix string, fn func(key string, k, v *yaml.Node)) {
		if m = yamlwalk.Deref(m); m.Kind != yaml.MappingNode {
			bad(m, strings.TrimSuffix(prefix, "."), "want a mapping")
			return
		}
		// Any key is taken (fn names the unknown ones), so the one report is a repeat.
		repeated := func(k *yaml.Node, field, _ string, _ ...any) { twice(k, field) }
		yamlwalk.Mapping(m, strings.TrimSuffix(prefix, "."), nil, repeated, func(k, v *yaml.Node, field string) {
			if seen[field] != nil {
				twice(k, field)
				return
			}
			seen[field] = k
			fn(k.Value, k, v)
		})
	}
	pairs(root, "", func(key string, k, v *yaml.Node) {
		switch key {
		case "store":
			c.Store = path(v, key)
		case "state":
			c.State = path(v, key)
		case "catalog":
			c.Catalog = path(v, key)
		case "watch":
			c.Watch = path(v, key)
		case "addr":
			c.Addr = str(v, key)
		case "collector":
			pairs(v, "collector.", func(key string, k, v *yaml.Node) {
				field := "collector." + key
				switch key {
				case "node":
					c.Node = str(v, field)
				case "interval":
					d, err := time.ParseDuration(str(v, field))
					if err != nil || d < time.Second || d > time.Hour || d%time.Millisecond != 0 {
						bad(v, field, "%q: want a duration of 1s..1h, e.g. 10s", v.Value)
					}
					c.Interval = d
				case "attribution":
					pairs(v, "collector.attribution.", func(key string, k, v *yaml.Node) {
						field := "collector.attribution." + key
						switch key {
						case "resolvers":
							if v.Kind != yaml.SequenceNode {
								bad(v, field, "want a list of kube, unix, static")
								return
							}
							for _, r := range v.Content {
								switch s := str(r, field); s {
								case "kube", "unix", "static":
									c.Resolvers = append(c.Resolvers, s)
								default:
									bad(r, field, "%q is not a resolver (want kube, unix or static)", s)
								}
							}
						case "static_map":
							c.StaticMap = path(v, field)
						case "roster":
							c.Roster = path(v, field)
						case "kubelet_socket":
							c.KubeletSocket = str(v, field)
						case "kube_user_label":
							c.KubeUserLabel = str(v, field)
						case "namespace_projects":
							c.NamespaceProjects = map[string]string{}
							pairs(v, field+".", func(ns string, k, v *yaml.Node) {
								if p := str(v, field+"."+ns); p != "" && ns != "" {
									c.NamespaceProjects[ns] = p
								}
							})
						default:
							bad(k, field, "unknown field (want resolvers, static_map, roster, kubelet_socket, kube_user_label, namespace_projects)")
						}
					})
				default:
					bad(k, field, "unknown field (want node, interval, attribution)")
				}
			})
		default:
			bad(k, key, "unknown field (want store, state, catalog, addr, watch, collector)")
		}
	})
	if c.Store == "" && seen["store"] == nil {
		errs = append(errs, fmt.Sprintf("%s: store: required (the SQLite usage store, e.g. /var/lib/cardhour/usage.db)", name))
	}
	if c.Catalog == "" && seen["catalog"] == nil {
		errs = append(errs, fmt.Sprintf("%s: catalog: required (the price catalog, YAML)", name))
	}
	if c.Node == "" && seen["collector.node"] == nil {
		errs = append(errs, fmt.Sprintf("%s: collector.node: required (the host name is unknown)", name))
	}
	if c.State == "" && c.Store != "" {
		c.State = filepath.Join(filepath.Dir(c.Store), "state.db")
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return c, nil
}

func runStandalone(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (YAML: store, state, catalog, addr, watch, collector)")
	validate := fs.Bool("validate", false, "check the configuration and the files it names, then exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour standalone --config FILE [--validate]")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "cardhour standalone: --config is required")
		fs.Usage()
		return 2
	}
	data, err := os.ReadFile(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour standalone:", err)
		return 1
	}
	cfg, err := parseStandalone(data, *configPath)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour standalone: invalid configuration:\n"+err.Error())
		return 2
	}
	if err := standalone(cfg, *validate, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "cardhour standalone:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func standalone(cfg *standaloneConfig, validate bool, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	var wo watchOptions
	if cfg.Watch != "" {
		var err error
		if wo, err = loadWatch(cfg.Watch, 30*time.Second); err != nil {
			return err
		}
	}
	nsp := make([]string, 0, len(cfg.NamespaceProjects))
	for ns, p := range cfg.NamespaceProjects {
		nsp = append(nsp, ns+"="+p)
	}
	sort.Strings(nsp)
	resolvers, closeRes, err := collectResolvers(collectFlags{resolvers: strings.Join(cfg.Resolvers, ","), staticMap: cfg.StaticMap,
		roster: cfg.Roster, socket: cfg.KubeletSocket, userLabel: cfg.KubeUserLabel, nsProjects: strings.Join(nsp, ",")}, log)
	if err != nil {
		return err
	}
	defer closeRes()
	if validate {
		if _, err := os.ReadFile(cfg.Catalog); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		fmt.Fprintln(stderr, "cardhour standalone: the configuration is valid")
		return nil
	}
	ctx, stop := standaloneContext()
	defer stop()
	b := &box{UsagePath: cfg.Store, StatePath: cfg.State, CatalogPath: cfg.Catalog, Addr: cfg.Addr, Log: log, Watch: wo}
	defer b.close()
	if err := b.open(ctx); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	src, err := nvmlsource.New(nvmlsource.Config{Lib: standaloneNVML(), Logger: log, Registerer: reg})
	if err != nil {
		return err // ErrNoNVML says what is missing
	}
	defer src.Close() //nolint:errcheck // NVML shutdown: nothing to do on failure
	c, err := collector.New(collector.Config{Node: cfg.Node, Interval: cfg.Interval, Source: src, Resolvers: resolvers,
		Publisher: b.Publisher(), Logger: log, Registerer: reg})
	if err != nil {
		return usageError{err}
	}
	b.markServing()
	fmt.Fprintf(stdout, "cardhour standalone: node %s, dashboard %s/ui/, usage store %s, state store %s\n", cfg.Node, b.url, b.UsagePath, b.StatePath)
	if standaloneReady != nil {
		standaloneReady(b.url)
	}
	// The collector takes its final sample when ctx ends; the ingest loop
	// stores what it published; then the HTTP server stops, then the
	// watcher, then the stores close.
	if err := b.run(ctx, stage{"collector", []actor{collectorsActor([]*collector.Collector{c}, log)}},
		stage{"ingest", []actor{b.ingestActor()}}); err != nil {
		return err
	}
	log.Info("standalone stopped")
	return nil
}
