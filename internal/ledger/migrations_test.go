package ledger_test

import (
	"os"
	"slices"
	"testing"
)

// Both stores keep their schemas in step: the same numbered migrations.
func TestMigrationsInStep(t *testing.T) {
	names := func(dir string) []string {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	lite, pg := names("sqlite/migrations"), names("postgres/migrations")
	if !slices.Equal(lite, pg) || len(lite) < 2 {
		t.Fatalf("sqlite migrations %v, postgres %v: want the same files", lite, pg)
	}
}
