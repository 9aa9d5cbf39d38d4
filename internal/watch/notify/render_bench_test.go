package notify

import (
	"slices"
	"testing"
)

// BenchmarkRender renders every golden message in both languages (16
// renders an op): what the notifier does per alert and person language.
func BenchmarkRender(b *testing.B) {
	cases := goldenCases(b)
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	slices.Sort(names)
	b.ReportAllocs()
	for b.Loop() {
		for _, name := range names {
			for _, lang := range Langs {
				if _, _, err := Render(cases[name], lang); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
