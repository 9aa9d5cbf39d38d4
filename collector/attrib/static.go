// Package attrib holds the collector's attribution resolvers: a static map of
// instances, Unix process owners (and Slurm jobs) through a roster, and
// Kubernetes pods through the kubelet's PodResources API.
package attrib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/collector"
)

// Entry is a project and user in a map or roster file.
type Entry struct {
	Project string `yaml:"project"`
	User    string `yaml:"user"`
}

// StaticFile is the static map file:
//
//	instances:
//	  MIG-4f1c…: {project: nlp-lab, user: "2023110042"}
//	  GPU-9a2e…: {project: cv-lab}
type StaticFile struct {
	Instances map[string]Entry `yaml:"instances"`
}

// Static attributes instances by UUID from a fixed map.
type Static struct{ m map[string]Entry }

// LoadStatic reads a static map file (strict: unknown keys fail with their line).
func LoadStatic(path string) (*Static, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read static map: %w", err)
	}
	var f StaticFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	for id, e := range f.Instances {
		if e.Project == "" {
			errs = append(errs, fmt.Errorf("%s: instance %q: project is required", path, id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return NewStatic(f.Instances), nil
}

// NewStatic returns a resolver over m (instance UUID → entry).
func NewStatic(m map[string]Entry) *Static { return &Static{m: m} }

// Name is "static".
func (s *Static) Name() string { return "static" }

// Resolve looks every instance up in the map.
func (s *Static) Resolve(_ context.Context, insts []collector.Instance) (map[string]collector.Holder, error) {
	out := map[string]collector.Holder{}
	for _, in := range insts {
		if e, ok := s.m[in.InstanceID]; ok {
			out[in.InstanceID] = collector.Holder{Project: e.Project, User: e.User}
		}
	}
	return out, nil
}

func decodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file maps nothing
		}
		return fmt.Errorf("invalid YAML: %w", err)
	}
	return nil
}
