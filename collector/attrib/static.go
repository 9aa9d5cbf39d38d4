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
	"regexp"

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
//	vms:                       # vGPU instances, by VM ID or VM name
//	  7d3c…-uuid: {project: rent-42}
//	  ai101-vm-07: {project: ai101, user: "2025010107"}
//	vm_patterns:               # VM names; named groups project and user
//	  - {pattern: '^(?P<project>[a-z0-9-]+)-vm-(?P<user>\d+)$'}
//	  - {pattern: '^lab-', project: ai101}
type StaticFile struct {
	Instances  map[string]Entry `yaml:"instances"`
	VMs        map[string]Entry `yaml:"vms"`
	VMPatterns []VMPattern      `yaml:"vm_patterns"`
}

// VMPattern attributes the vGPU instances whose VM name matches Pattern (a
// Go regexp): the named groups project and user, where they match, else
// Project and User.
type VMPattern struct {
	Pattern string `yaml:"pattern"`
	Project string `yaml:"project"`
	User    string `yaml:"user"`
	re      *regexp.Regexp
}

// Static attributes instances by UUID from a fixed map, and vGPU instances
// by VM ID, VM name or VM-name pattern.
type Static struct {
	m        map[string]Entry
	vms      map[string]Entry
	patterns []VMPattern
}

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
	for id, e := range f.VMs {
		if e.Project == "" {
			errs = append(errs, fmt.Errorf("%s: vm %q: project is required", path, id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s, err := NewStaticVMs(f.Instances, f.VMs, f.VMPatterns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// NewStatic returns a resolver over m (instance UUID → entry).
func NewStatic(m map[string]Entry) *Static { return &Static{m: m} }

// NewStaticVMs returns a resolver over instances (instance UUID → entry),
// vms (VM ID or name → entry) and VM-name patterns, tried in that order.
func NewStaticVMs(instances, vms map[string]Entry, patterns []VMPattern) (*Static, error) {
	s := &Static{m: instances, vms: vms}
	var errs []error
	for i, p := range patterns {
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("vm_patterns[%d]: %w", i, err))
			continue
		}
		hasGroup := re.SubexpIndex("project") >= 0
		if p.Project == "" && !hasGroup {
			errs = append(errs, fmt.Errorf("vm_patterns[%d] %q: want a project, or a named group (?P<project>…)", i, p.Pattern))
			continue
		}
		p.re = re
		s.patterns = append(s.patterns, p)
	}
	return s, errors.Join(errs...)
}

// Name is "static".
func (s *Static) Name() string { return "static" }

// Resolve looks every instance up in the map.
func (s *Static) Resolve(_ context.Context, insts []collector.Instance) (map[string]collector.Holder, error) {
	out := map[string]collector.Holder{}
	for _, in := range insts {
		if e, ok := s.m[in.InstanceID]; ok {
			h := collector.Holder{Project: e.Project, User: e.User}
			if in.VMID != "" {
				h.Ref = "vm:" + in.VMID
			}
			out[in.InstanceID] = h
			continue
		}
		if in.VMID == "" && in.VMName == "" {
			continue
		}
		if e, ok := s.vm(&in); ok {
			out[in.InstanceID] = collector.Holder{Project: e.Project, User: e.User, Ref: "vm:" + in.VMID}
		}
	}
	return out, nil
}

// vm attributes a vGPU instance by its VM: ID, then name, then patterns.
func (s *Static) vm(in *collector.Instance) (Entry, bool) {
	if e, ok := s.vms[in.VMID]; ok && in.VMID != "" {
		return e, true
	}
	if e, ok := s.vms[in.VMName]; ok && in.VMName != "" {
		return e, true
	}
	if in.VMName == "" {
		return Entry{}, false
	}
	for _, p := range s.patterns {
		m := p.re.FindStringSubmatch(in.VMName)
		if m == nil {
			continue
		}
		e := Entry{Project: p.Project, User: p.User}
		if i := p.re.SubexpIndex("project"); i >= 0 && m[i] != "" {
			e.Project = m[i]
		}
		if i := p.re.SubexpIndex("user"); i >= 0 && m[i] != "" {
			e.User = m[i]
		}
		if e.Project != "" {
			return e, true
		}
	}
	return Entry{}, false
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
