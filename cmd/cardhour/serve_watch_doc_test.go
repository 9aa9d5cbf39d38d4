//go:build !collector

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/watch/alert"
	"github.com/cardhour/cardhour/internal/watch/notify"
	"github.com/cardhour/cardhour/internal/watch/release"
)

// The example watch file of docs/watch.md is read by serve's own parsers
// (its notify: and release: sections by internal/watch/notify and
// internal/watch/release), with the files it names made up, and routes
// as the text under it says.
func TestWatchDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/watch.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(doc), "\n## The file\n")
	require.True(t, ok, "docs/watch.md has a section \"The file\"")
	_, block, ok := strings.Cut(after, "```yaml\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	require.NotContains(t, block, "...", "the example is whole")

	dir := t.TempDir()
	paths := regexp.MustCompile(`/etc/cardhour/[\w.-]+`).FindAllString(block, -1)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		content := "s3cret\n"
		if strings.HasSuffix(p, "kubeconfig") {
			content = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:6443\"}}]\n" +
				"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(p)), []byte(content), 0o600))
	}
	file := filepath.Join(dir, "watch.yaml")
	require.NoError(t, os.WriteFile(file, []byte(strings.ReplaceAll(block, "/etc/cardhour/", dir+"/")), 0o600))

	wo, err := loadWatch(file, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, wo.Every)
	require.Equal(t, 5*time.Minute, wo.Config.BudgetEvery)
	require.Len(t, wo.Config.Admins, 1)
	require.Len(t, wo.Config.Leads["nlp-lab"], 1)

	na, ok := wo.Config.Notifier.(*notify.Notifier)
	require.True(t, ok, "the notify: section gives the notifier")
	people := []alert.Person{
		{Role: "holder", Project: "nlp-lab", User: "alice", Name: "Alice", Email: "alice@example.edu"},
		{Role: "lead", Project: "nlp-lab", Name: "Prof. Li", Email: "li@example.edu", IM: "dingtalk:0412", Lang: "zh-CN"},
		{Role: "admin", Name: "Ops", Email: "ops@example.edu", IM: "slack:U024BE7LH", Lang: "en"},
	}
	es, err := na.Plan(alert.Message{Kind: billing.AlertIdleWarning, Key: "idle_warning|MIG-1|1",
		Facts: alert.Facts{Project: "nlp-lab", User: "alice", InstanceID: "MIG-1", Node: "gpu-01", At: time.Now(),
			HeldSince: time.Now().Add(-time.Hour), IdleSince: time.Now().Add(-time.Hour), TZ: time.UTC, Currency: "CNY"}}, people)
	require.NoError(t, err)
	routes := map[string][]string{}
	for _, e := range es {
		routes[e.To.Role] = append(routes[e.To.Role], e.Channel)
	}
	for _, r := range routes {
		slices.Sort(r)
	}
	require.Equal(t, map[string][]string{"holder": {"mail"}, "lead": {"mail", "nlp-group"},
		"admin": {"mail", "nlp-group", "ops", "ticketing"}}, routes)

	set, ok := wo.Config.Releaser.(*release.Set)
	require.True(t, ok, "the release: section gives the releasers")
	require.Equal(t, []string{"scancel"}, set.For("hpc-lab"))
	require.Equal(t, []string{"k8s", "site-hook"}, set.For("vision"))
	require.Empty(t, set.For("thesis-archive"))
	require.Equal(t, []string{"k8s"}, set.For("nlp-lab"))
}
