package deploytest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// freeForm are values passed through whole (Kubernetes objects, maps).
var freeForm = map[string]bool{"nodeSelector": true, "tolerations": true, "affinity": true, "resources": true,
	"securityContext": true, "podSecurityContext": true, "annotations": true, "labels": true}

func leaves(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || freeForm[prefix[strings.LastIndex(prefix, ".")+1:]] {
		*out = append(*out, prefix)
		return
	}
	for k, x := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leaves(p, x, out)
	}
}

// Every value of the chart is in docs/deploy.md's table: as `path`, or as
// `.last` in the row of its parent `parent.…`.
func TestChartValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deployments/helm/cardhour/values.yaml"))
	require.NoError(t, err)
	var vals map[string]any
	require.NoError(t, yaml.UnmarshalStrict(b, &vals))
	var paths []string
	leaves("", vals, &paths)
	sort.Strings(paths)
	require.Greater(t, len(paths), 40)
	doc, err := os.ReadFile(filepath.Join(root(t), "docs/deploy.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "## Chart values")
	require.True(t, ok)
	rows := strings.Split(table, "\n")
	for _, p := range paths {
		found := false
		parent, last := "", p
		if i := strings.LastIndex(p, "."); i >= 0 {
			parent, last = p[:i], p[i+1:]
		}
		for _, r := range rows {
			if strings.Contains(r, "`"+p+"`") || strings.Contains(r, "`"+p+".") ||
				(parent != "" && strings.Contains(r, "`"+parent+".") && strings.Contains(r, "`."+last+"`")) {
				found = true
				break
			}
		}
		require.True(t, found, "value %s is not in docs/deploy.md's table of chart values", p)
	}
}
