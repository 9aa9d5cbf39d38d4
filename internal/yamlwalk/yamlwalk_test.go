package yamlwalk_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/cardhour/cardhour/internal/yamlwalk"
)

// walk parses doc and walks its root mapping under path "top", returning the
// keys fn saw (as path=value) and the problems reported (as line: path: msg).
func walk(t *testing.T, doc string, allowed []string) (seen, problems []string) {
	t.Helper()
	var root yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(doc), &root))
	report := func(n *yaml.Node, path, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%d: %s: %s", n.Line, path, fmt.Sprintf(format, args...)))
	}
	yamlwalk.Mapping(root.Content[0], "top", allowed, report, func(k, v *yaml.Node, path string) {
		seen = append(seen, path+"="+v.Value)
	})
	return seen, problems
}

func TestMappingReportsUnknownAndRepeatedKeys(t *testing.T) {
	seen, problems := walk(t, "b: 1\nzz: 2\na: 3\nb: 4\n", []string{"b", "a"})
	require.Equal(t, []string{"top.b=1", "top.a=3"}, seen)
	require.Equal(t, []string{
		"2: top.zz: unknown field (allowed: b, a)",
		"4: top.b: appears more than once (first at line 1)",
	}, problems)
}

func TestMappingAnyKeyWhenAllowedIsNil(t *testing.T) {
	seen, problems := walk(t, "x: 1\ny: 2\n", nil)
	require.Equal(t, []string{"top.x=1", "top.y=2"}, seen)
	require.Empty(t, problems)
}

func TestMappingFollowsAliases(t *testing.T) {
	var root yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("base: &b {x: one}\nuse: *b\n"), &root))
	var seen, problems []string
	report := func(n *yaml.Node, path, format string, args ...any) { problems = append(problems, path) }
	use := root.Content[0].Content[3]
	require.Equal(t, yaml.AliasNode, use.Kind)
	yamlwalk.Mapping(use, "use", nil, report, func(k, v *yaml.Node, path string) { seen = append(seen, path+"="+v.Value) })
	require.Equal(t, []string{"use.x=one"}, seen)
	require.Empty(t, problems)
}

func TestMappingNullIsEmptyOtherShapesAreReported(t *testing.T) {
	seen, problems := walk(t, "~\n", nil)
	require.Empty(t, seen)
	require.Empty(t, problems)

	_, problems = walk(t, "- a\n", nil)
	require.Equal(t, []string{"1: top: expected a mapping (key: value lines), not a list"}, problems)
	_, problems = walk(t, "word\n", nil)
	require.Equal(t, []string{`1: top: expected a mapping (key: value lines), not the value "word"`}, problems)
}

func TestJoin(t *testing.T) {
	require.Equal(t, "a", yamlwalk.Join("", "a"))
	require.Equal(t, "a.b", yamlwalk.Join("a", "b"))
}

func TestPairsYieldsEveryPairAsWritten(t *testing.T) {
	var root yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("a: &x 1\nb: *x\na: 2\n"), &root))
	var got []string
	for k, v := range yamlwalk.Pairs(root.Content[0]) {
		got = append(got, fmt.Sprintf("%s=%s/%d", k.Value, v.Value, v.Kind))
		if k.Value == "b" {
			require.Equal(t, yaml.AliasNode, v.Kind, "an alias is yielded as written")
		}
	}
	require.Equal(t, []string{
		fmt.Sprintf("a=1/%d", yaml.ScalarNode), fmt.Sprintf("b=x/%d", yaml.AliasNode), fmt.Sprintf("a=2/%d", yaml.ScalarNode),
	}, got)
	for range yamlwalk.Pairs(root.Content[0].Content[1]) {
		t.Fatal("a scalar has no pairs")
	}
	n := 0
	for range yamlwalk.Pairs(root.Content[0]) {
		n++
		break
	}
	require.Equal(t, 1, n, "the loop stops when asked")
}
