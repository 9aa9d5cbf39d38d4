// Package reads is the billing engine over a usage store: invoices from stored
// runs (BillFrom), usage reports, what is held now, data quality and the usage
// cache. Each store only fetches rows through the small interfaces declared
// here, so every read is written once and all stores answer alike.
package reads
