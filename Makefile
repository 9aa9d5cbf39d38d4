# cardhour — build, test, benchmark, lint.
#
#   make build         build ./bin/cardhour
#   make test          unit tests + integration tests against real ClickHouse and Kafka
#                      (started on loopback by deployments/testenv/services.sh unless
#                      CLICKHOUSE_ADDR / KAFKA_BROKERS point at running ones)
#   make bench         Go benchmarks and the benchmark scripts (docs/benchmarks.md)
#   make lint          golangci-lint v2 (installed into ./bin on first use)
#   make services-up / services-down   the test services, by hand

GO        ?= go
BIN       := $(CURDIR)/bin
FUZZTIME  ?= 10s
GOLANGCI_VERSION ?= v2.5.0

.PHONY: all build test unit-test fuzz-short bench bench-go lint fmt services-up services-down clean

all: build

build:
	$(GO) build -trimpath -o $(BIN)/cardhour ./cmd/cardhour

test:
	$(GO) vet ./...
	deployments/testenv/with-services.sh $(GO) test -count=1 ./...
	$(MAKE) fuzz-short

unit-test:
	$(GO) test -count=1 -short ./...

# A few seconds of coverage-guided fuzzing per target; run longer by hand with
# e.g. `make fuzz-short FUZZTIME=10m`.
fuzz-short:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeSample$$' -fuzztime=$(FUZZTIME) ./schemas
	$(GO) test -run='^$$' -fuzz='^FuzzParseTimestamp$$' -fuzztime=$(FUZZTIME) ./schemas
	$(GO) test -run='^$$' -fuzz='^FuzzParseCatalog$$' -fuzztime=$(FUZZTIME) ./schemas

bench: bench-go
	scripts/bench-bill.sh

bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

lint:
	@test -x $(BIN)/golangci-lint || GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	$(BIN)/golangci-lint run ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

services-up:
	deployments/testenv/services.sh up

services-down:
	deployments/testenv/services.sh down

clean:
	rm -rf $(BIN)
