// Package yamlwalk is the one way the configuration parsers walk YAML: a
// mapping's keys in order, each with its field path, aliases followed; an
// unknown key or a key given twice is reported at its line, so that every
// parser names line and field alike and reports all problems at once.
package yamlwalk

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Report records a problem at node n; path names the field ("" at the top).
type Report func(n *yaml.Node, path, format string, args ...any)

// Mapping walks the mapping n: fn gets each key, its value (aliases
// followed) and the key's path. allowed nil takes any key; a key outside
// allowed is reported with the allowed ones, in the order given. A key given
// twice is reported and its second value skipped. A null n is an empty
// mapping; any other node is reported.
func Mapping(n *yaml.Node, path string, allowed []string, report Report, fn func(k, v *yaml.Node, path string)) {
	n = Deref(n)
	if IsNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		report(n, path, "expected a mapping (key: value lines), not %s", Kind(n))
		return
	}
	seen := map[string]int{}
	for k, v := range Pairs(n) {
		v = Deref(v)
		kp := Join(path, k.Value)
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			report(k, kp, "unknown field (allowed: %s)", strings.Join(allowed, ", "))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			report(k, kp, "appears more than once (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		fn(k, v, kp)
	}
}

// Pairs yields each key of the mapping n with its value as written (an
// alias not followed), repeated keys included, in order: the one loop over a
// mapping's nodes. Walk with Mapping; Pairs is for what is read around the
// walk, such as a key that decides which others are allowed, or a value that
// is text rather than a node. A node other than a mapping has no pairs.
func Pairs(n *yaml.Node) iter.Seq2[*yaml.Node, *yaml.Node] {
	return func(yield func(k, v *yaml.Node) bool) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !yield(n.Content[i], n.Content[i+1]) {
				return
			}
		}
	}
}

// Join is the path of key under path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Deref follows aliases to the node they name.
func Deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is an explicit or empty null.
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// Kind says what n is, for an error: "a mapping", "a list", "nothing", or
// the value quoted.
func Kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}
