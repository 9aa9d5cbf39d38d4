package watch

import (
	"strings"
	"testing"
)

func TestLoadFileDashboardURL(t *testing.T) {
	f, err := LoadFile([]byte("watch:\n  dashboard_url: https://gpu.example.edu/\n"), "watch.yaml")
	if err != nil || f.DashboardURL != "https://gpu.example.edu" {
		t.Fatalf("%q, %v", f.DashboardURL, err)
	}
	for _, bad := range []string{"gpu.example.edu", "ftp://gpu.example.edu", "https://gpu.example.edu/ui/#/now"} {
		_, err := LoadFile([]byte("watch:\n  dashboard_url: "+bad+"\n"), "watch.yaml")
		if err == nil || !strings.Contains(err.Error(), "watch.yaml:2") || !strings.Contains(err.Error(), "watch.dashboard_url") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
