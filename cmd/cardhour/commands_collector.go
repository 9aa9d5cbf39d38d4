//go:build collector

package main

// buildVariant is appended to the version of the collector-only build.
const buildVariant = " (collector build: collect, simulate, version)"

// addCommands adds nothing: built with -tags collector, the binary is the node
// agent alone, without the billing, ingest, ClickHouse and SQLite code.
func addCommands(map[string]command) {}
