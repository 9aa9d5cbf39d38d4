// Package e2e holds the end-to-end tests of the ingest pipeline against the real
// test services: samples → Kafka → ingest worker → ClickHouse → invoices, compared
// byte for byte with billing the same samples from a file, under faults (worker
// killed mid-batch, ClickHouse or Kafka unavailable for a while) and with
// malformed messages. It has no code of its own.
package e2e
