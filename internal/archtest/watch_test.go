package archtest

import (
	"slices"
	"strings"
	"testing"
)

// The watcher speaks to its edges through internal/watch/alert's types and
// its own interfaces: it links none of their code (client-go, SMTP, the
// vendors' robots), which only cmd wires in.
func TestWatcherLinksNoEdgeCode(t *testing.T) {
	ps := goList(t, "./internal/watch")
	if len(ps) != 1 || !slices.Contains(ps[0].Deps, module+"/internal/watch/alert") {
		t.Fatalf("go list found no internal/watch linking internal/watch/alert: the check proves nothing")
	}
	for _, d := range ps[0].Deps {
		for _, banned := range []string{"k8s.io/", "net/smtp", module + "/internal/watch/notify", module + "/internal/watch/release"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the watcher links %s", d)
			}
		}
	}
}
