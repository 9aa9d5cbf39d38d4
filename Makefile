# cardhour — build, test, benchmark, lint.
#
#   make run           build, then start `cardhour demo`: a simulated lab through the whole
#                      product, with the dashboard on http://127.0.0.1:8080/ui/ (it prints the
#                      URL and an admin token; Ctrl-C stops; DEMO_ADDR, DEMO_SPEED, DEMO_STATE)
#   make build         build ./bin/cardhour
#   make build-collector   build ./bin/cardhour-collector: the node agent alone (collect,
#                      simulate, version), for the GPU-node DaemonSet
#   make images        the container images of deployments/kubernetes (Docker)
#   make manifests     deployments/kubernetes/cardhour.yaml from the Helm chart
#   make test          go.mod tidy check, vet, unit tests + integration tests against real
#                      ClickHouse, Kafka, PostgreSQL and an SMTP sink
#                      (started on loopback by deployments/testenv/services.sh unless
#                      CLICKHOUSE_ADDR / KAFKA_BROKERS / POSTGRES_DSN / SMTP_ADDR point at running ones)
#   make test-kcluster the Kafka cluster tests (ingest/e2e TestKafkaCluster*): starts the
#                      services.sh profile kcluster (three brokers) and ClickHouse when it is
#                      not running, runs them, stops the profile
#   make test-chcluster the ClickHouse cluster tests on the profile chcluster (likewise)
#   make test-clusters both, one after the other (about 6 minutes; CI runs it after `make test`)
#   make api-fuzz      schemathesis against a real `cardhour serve`, from its OpenAPI document
#                      (longer: make api-fuzz API_FUZZ_MAX_EXAMPLES=500)
#   make bench         Go benchmarks and the benchmark scripts (docs/benchmarks.md)
#   make lint          golangci-lint v2 (installed into ./bin on first use)
#   make services-up / services-down   the test services, by hand

GO        ?= go
BIN       := $(CURDIR)/bin
# go-nvml's cgo prologue declares every NVML function, deprecated ones too; keep
# the compiler quiet about those.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
# Fuzz budgets are execution counts, not durations: with a duration, Go 1.26's
# fuzz coordinator can report a spurious "context deadline exceeded" failure at
# the deadline (golang/go#75804, fixed in Go 1.27). About 10 s each here.
FUZZ_DECODE    ?= 150000x
FUZZ_TIMESTAMP ?= 300000x
FUZZ_CATALOG   ?= 250000x
GOLANGCI_VERSION ?= v2.5.0

.PHONY: all run build build-collector images manifests test tidy-check unit-test fuzz-short api-fuzz test-kcluster test-chcluster test-clusters bench bench-go lint fmt services-up services-down clean

all: build

build:
	$(GO) build -trimpath -o $(BIN)/cardhour ./cmd/cardhour

# The collector-only variant of the same command: -tags collector leaves out the
# billing, ingest, ClickHouse and SQLite code; grpcnotrace leaves out gRPC's
# x/net/trace debug pages (and html/template with them). 23 MB instead of 46 MB,
# and 14 MB less resident memory on every GPU node (docs/benchmarks.md).
COLLECTOR_TAGS := collector,grpcnotrace

build-collector:
	$(GO) build -trimpath -tags $(COLLECTOR_TAGS) -o $(BIN)/cardhour-collector ./cmd/cardhour

# The container images of deployments/kubernetes (needs Docker with BuildKit).
IMAGE_TAG ?= latest
images:
	docker build -f deployments/docker/Dockerfile --target cardhour -t cardhour/cardhour:$(IMAGE_TAG) .
	docker build -f deployments/docker/Dockerfile --target cardhour-collector -t cardhour/cardhour-collector:$(IMAGE_TAG) .

# The plain manifests are the chart rendered with deployments/kubernetes/values.yaml
# (helm built once by deployments/testenv/helm.sh; deployments/deploytest checks
# the file is current).
manifests:
	@helm=$$(GO=$(GO) deployments/testenv/helm.sh) && { \
	  printf '%s\n' '# cardhour on Kubernetes: the Helm chart deployments/helm/cardhour rendered with' \
	    '# deployments/kubernetes/values.yaml by `make manifests` (do not edit; docs/deploy.md).' \
	    '#   kubectl create namespace cardhour' \
	    '#   kubectl -n cardhour create secret generic cardhour-credentials --from-literal=store-dsn=... --from-literal=state-dsn=...' \
	    '#   kubectl apply -f deployments/kubernetes/cardhour.yaml'; \
	  "$$helm" template cardhour deployments/helm/cardhour --namespace cardhour -f deployments/kubernetes/values.yaml; \
	} > deployments/kubernetes/cardhour.yaml.tmp && mv deployments/kubernetes/cardhour.yaml.tmp deployments/kubernetes/cardhour.yaml

# The demo: simulated time runs DEMO_SPEED times faster (60: an hour a minute);
# DEMO_STATE keeps its stores in a directory (default: a temporary one).
DEMO_ADDR  ?= 127.0.0.1:8080
DEMO_SPEED ?= 60
DEMO_STATE ?=
run: build
	$(BIN)/cardhour demo --addr $(DEMO_ADDR) --speed $(DEMO_SPEED) $(if $(DEMO_STATE),--state $(DEMO_STATE))

test: tidy-check
	$(GO) vet ./...
	$(GO) vet -tags $(COLLECTOR_TAGS) ./cmd/cardhour
	@# the chart tests' helm CLI, built once (minutes) outside the tests' timeout;
	@# without it they skip, or fail under CI=true
	GO=$(GO) deployments/testenv/helm.sh >/dev/null || [ "$$CI" != true ]
	deployments/testenv/with-services.sh $(GO) test -count=1 ./...
	$(GO) test -count=1 -tags $(COLLECTOR_TAGS) ./cmd/cardhour
	$(MAKE) fuzz-short
	$(MAKE) api-fuzz

# The Kafka cluster tests need three Kafka JVMs beside ClickHouse: not part of `test`,
# which stays as fast; CI runs them after it (make test-clusters, about 6 minutes on two
# cores, one profile at a time). ClickHouse, if started here, is left running.
test-kcluster:
	@set -e; eval "$$(deployments/testenv/services.sh up clickhouse)"; \
	eval "$$(deployments/testenv/services.sh up kcluster)"; \
	rc=0; $(GO) test -count=1 -v -run '^TestKafkaCluster' ./ingest/e2e || rc=$$?; \
	deployments/testenv/services.sh down kcluster; exit $$rc

# The ClickHouse cluster tests (ingest/clickhouse and cmd/cardhour TestClickHouseCluster*:
# reads, invoices, upgrades, concurrent writers, a replica killed mid-back-fill, a
# one-server store copied to the cluster) on the services.sh profile chcluster (one
# ZooKeeper, two shards, one of two replicas) beside the single ClickHouse, one package
# at a time (a replica killed by one package's test would break the other's DDL).
test-chcluster:
	@set -e; eval "$$(deployments/testenv/services.sh up clickhouse)"; \
	eval "$$(deployments/testenv/services.sh up chcluster)"; \
	rc=0; $(GO) test -count=1 -p 1 -run '^TestClickHouseCluster' ./ingest/clickhouse ./cmd/cardhour || rc=$$?; \
	deployments/testenv/services.sh down chcluster; exit $$rc

# Both cluster profiles' tests, one after the other (.ci/run: after `make test`).
test-clusters: test-kcluster test-chcluster

# go.mod and go.sum must be exactly what `go mod tidy` makes of the code: a
# dependency marked indirect that the code imports, or a missing sum, fails here.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result" >&2; exit 1; }

unit-test:
	$(GO) test -count=1 -short ./...

# A few seconds of coverage-guided fuzzing per target; run longer by hand with
# e.g. `make fuzz-short FUZZ_DECODE=50000000x`.
fuzz-short:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeSample$$' -fuzztime=$(FUZZ_DECODE) ./schemas
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeFast$$' -fuzztime=$(FUZZ_DECODE) ./schemas
	$(GO) test -run='^$$' -fuzz='^FuzzParseTimestamp$$' -fuzztime=$(FUZZ_TIMESTAMP) ./schemas
	$(GO) test -run='^$$' -fuzz='^FuzzParseCatalog$$' -fuzztime=$(FUZZ_CATALOG) ./schemas

# The whole HTTP API fuzzed from its OpenAPI document by schemathesis (PyPI, into
# a venv under ~/.cache/cardhour-testenv): zero 5xx, every response as documented.
# Skipped with a notice without python3/pip, failing under CI=true.
API_FUZZ_MAX_EXAMPLES ?= 5
api-fuzz:
	API_FUZZ_MAX_EXAMPLES=$(API_FUZZ_MAX_EXAMPLES) GO=$(GO) scripts/api-fuzz.sh

# The scripts print ratios against baselines measured in the same run; they need
# the test services (started here when CLICKHOUSE_ADDR / KAFKA_BROKERS are unset).
bench: bench-go
	scripts/bench-bill.sh
	deployments/testenv/with-services.sh scripts/bench-collector.sh 120
	deployments/testenv/with-services.sh scripts/bench-collector-reconnect.sh 3
	deployments/testenv/with-services.sh scripts/bench-ingest.sh
	scripts/bench-export.sh

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
