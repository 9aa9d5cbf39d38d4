// Package watche2e holds the end-to-end test of the watcher against the real
// test services: a simulated week of samples → Kafka → ingest worker →
// ClickHouse → watcher replicas sharing a PostgreSQL ledger → alerts at a
// signed webhook and releases by a webhook releaser, and the month's
// invoice from the same store. It has no code of its own.
package watche2e
