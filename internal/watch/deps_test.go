package watch

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The watcher speaks to its edges through internal/watch/alert's types and
// its own interfaces: it links none of their code (client-go, SMTP, the
// vendors' robots), which only cardhour serve wires in.
func TestWatcherLinksNoEdgeCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/cardhour/cardhour/internal/watch/alert") {
		t.Fatal("go list -deps does not list internal/watch/alert: the check below proves nothing")
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/", "net/smtp", "github.com/cardhour/cardhour/internal/watch/notify",
			"github.com/cardhour/cardhour/internal/watch/release"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the watcher links %s", d)
			}
		}
	}
}
