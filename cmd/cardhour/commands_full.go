//go:build !collector

package main

// buildVariant is appended to the version; empty for the full binary.
const buildVariant = ""

// addCommands adds the billing and ingest subcommands, left out of the
// collector-only build (-tags collector).
func addCommands(cmds map[string]command) {
	cmds["bill"] = command{"compute invoices for a month from a catalog and samples", runBill}
	cmds["generate"] = command{"write synthetic samples (JSON Lines) for tests and benchmarks", runGenerate}
	cmds["ingest"] = command{"consume samples from Kafka (or back-fill a file) into ClickHouse or SQLite", runIngest}
	cmds["migrate"] = command{"create or upgrade a usage store's schema (ClickHouse or SQLite)", runMigrate}
	cmds["serve"] = command{"serve the HTTP API (/api/v1, OpenAPI at /api/v1/openapi.json) over the usage and state stores", runServe}
	cmds["token"] = command{"create, list or revoke API tokens (create prints the secret once)", runToken}
	cmds["idle"] = command{"list the idle warnings and releases the catalog's policies call for", runIdle}
	cmds["probe"] = command{"GET a health URL; exit 0 on 2xx (container health checks)", runProbe}
	cmds["demo"] = command{"run a simulated fleet through the whole product (collector, ingest, watcher, API, dashboard) in one process", runDemo}
	cmds["standalone"] = command{"run the whole product on one GPU server: NVML collector, SQLite, watcher, API and dashboard in one process", runStandalone}
	cmds["advise"] = command{"advise each project which reservations would have cost least, and which covered little", runAdvise}
}
