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
	p := &standaloneParser{c: c, name: name, dir: filepath.Dir(name), seen: map[string]*yaml.Node{}}
	p.pairs(root, "", p.top)
	if c.Store == "" && p.seen["store"] == nil {
		p.errs = append(p.errs, fmt.Sprintf("%s: store: required (the SQLite usage store, e.g. /var/lib/cardhour/usage.db)", name))
	}
	if c.Catalog == "" && p.seen["catalog"] == nil {
		p.errs = append(p.errs, fmt.Sprintf("%s: catalog: required (the price catalog, YAML)", name))
	}
	if c.Node == "" && p.seen["collector.node"] == nil {
		p.errs = append(p.errs, fmt.Sprintf("%s: collector.node: required (the host name is unknown)", name))
	}
	if c.State == "" && c.Store != "" {
		c.State = filepath.Join(filepath.Dir(c.Store), "state.db")
	}
	if len(p.errs) > 0 {
		return nil, errors.New(strings.Join(p.errs, "\n"))
	}
	return c, nil
}

// standaloneParser fills c from the file name, one section at a time.
type standaloneParser struct {
	c         *standaloneConfig
	name, dir string
	errs      []string
	// seen holds each field's key by its dotted path, wherever it is
	// written: a key given twice is reported at its second place, with the
	// line of its first.
	seen map[string]*yaml.Node
}

func (p *standaloneParser) bad(n *yaml.Node, field, format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf("%s:%d: %s: %s", p.name, n.Line, field, fmt.Sprintf(format, args...)))
}

func (p *standaloneParser) str(v *yaml.Node, field string) string {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		p.bad(v, field, "want a string")
		return ""
	}
	return v.Value
}

// path is a file's path, taken from the file's directory when relative.
func (p *standaloneParser) path(v *yaml.Node, field string) string {
	s := p.str(v, field)
	if s != "" && !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	return s
}

func (p *standaloneParser) twice(k *yaml.Node, field string) {
	p.bad(k, field, "given twice (also on line %d)", p.seen[field].Line)
}

// pairs walks the mapping m of the fields under prefix (internal/yamlwalk);
// fn names the unknown ones.
func (p *standaloneParser) pairs(m *yaml.Node, prefix string, fn func(key string, k, v *yaml.Node)) {
	if m = yamlwalk.Deref(m); m.Kind != yaml.MappingNode {
		p.bad(m, strings.TrimSuffix(prefix, "."), "want a mapping")
		return
	}
	// Any key is taken (fn names the unknown ones), so the one report is a repeat.
	repeated := func(k *yaml.Node, field, _ string, _ ...any) { p.twice(k, field) }
	yamlwalk.Mapping(m, strings.TrimSuffix(prefix, "."), nil, repeated, func(k, v *yaml.Node, field string) {
		if p.seen[field] != nil {
			p.twice(k, field)
			return
		}
		p.seen[field] = k
		fn(k.Value, k, v)
	})
}

func (p *standaloneParser) top(key string, k, v *yaml.Node) {
	c := p.c
	if dst := map[string]*string{"store": &c.Store, "state": &c.State, "catalog": &c.Catalog, "watch": &c.Watch}[key]; dst != nil {
		*dst = p.path(v, key)
		return
	}
	switch key {
	case "addr":
		c.Addr = p.str(v, key)
	case "collector":
		p.pairs(v, "collector.", p.collector)
	default:
		p.bad(k, key, "unknown field (want store, state, catalog, addr, watch, collector)")
	}
}

func (p *standaloneParser) collector(key string, k, v *yaml.Node) {
	field := "collector." + key
	switch key {
	case "node":
		p.c.Node = p.str(v, field)
	case "interval":
		d, err := time.ParseDuration(p.str(v, field))
		if err != nil || d < time.Second || d > time.Hour || d%time.Millisecond != 0 {
			p.bad(v, field, "%q: want a duration of 1s..1h, e.g. 10s", v.Value)
		}
		p.c.Interval = d
	case "attribution":
		p.pairs(v, "collector.attribution.", p.attribution)
	default:
		p.bad(k, field, "unknown field (want node, interval, attribution)")
	}
}

func (p *standaloneParser) attribution(key string, k, v *yaml.Node) {
	c := p.c
	field := "collector.attribution." + key
	if dst := map[string]*string{"static_map": &c.StaticMap, "roster": &c.Roster}[key]; dst != nil {
		*dst = p.path(v, field)
		return
	}
	if dst := map[string]*string{"kubelet_socket": &c.KubeletSocket, "kube_user_label": &c.KubeUserLabel}[key]; dst != nil {
		*dst = p.str(v, field)
		return
	}
	switch key {
	case "resolvers":
		if v.Kind != yaml.SequenceNode {
			p.bad(v, field, "want a list of kube, unix, static")
			return
		}
		for _, r := range v.Content {
			switch s := p.str(r, field); s {
			case "kube", "unix", "static":
				c.Resolvers = append(c.Resolvers, s)
			default:
				p.bad(r, field, "%q is not a resolver (want kube, unix or static)", s)
			}
		}
	case "namespace_projects":
		c.NamespaceProjects = map[string]string{}
		p.pairs(v, field+".", func(ns string, _, v *yaml.Node) {
			if s := p.str(v, field+"."+ns); s != "" && ns != "" {
				c.NamespaceProjects[ns] = s
			}
		})
	default:
		p.bad(k, field, "unknown field (want resolvers, static_map, roster, kubelet_socket, kube_user_label, namespace_projects)")
	}
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
