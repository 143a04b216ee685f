# quarry: make help lists the targets.
GO        ?= go
BIN       := bin/quarry
DATA      ?= ./data
PKGS      := ./...
GOFLAGS   ?=
TEST_TIMEOUT ?= 25m
export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: help build run test bounds e2e e2e-mssql images bench eval lint tools chromium chaos soak clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Static, as scripts/images.sh builds the images: a cgo build links the C
# library and the dynamic loader, and starts each thread through pthreads;
# every process paid for it (quarry version 39.5 to 34.0 ms of CPU, a
# selective term 68.0 to 60.1 ms, docs/benchmarks.md).
build: ## build bin/quarry
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -o $(BIN) ./cmd/quarry

run: build ## run the whole pipeline in one process on embedded defaults (lake under ./data/lake)
	$(BIN) run --data $(DATA)

tools: ## build the test tools (MinIO and a minimal OpenTelemetry Collector, from their Go modules) into bin/tools
	./scripts/build-minio.sh
	./scripts/build-otelcol.sh

chromium: ## install Debian's chromium (if missing) for the browser test of quarry serve
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

test: tools ## vet and run every unit and integration test with -race (and the multi-process suite of the e2e module)
	$(GO) vet $(PKGS)
	$(GO) test -race -timeout $(TEST_TIMEOUT) $(PKGS)
	cd e2e && $(GO) vet $(PKGS) && $(GO) test -race -timeout $(TEST_TIMEOUT) ./process/...

bounds: ## a week of commits (604,800 at the default 1s interval) on an injected clock through the committer's NATS and Delta log code: streams, buckets and _delta_log stay bounded (long; not part of test)
	QUARRY_BOUNDS_COMMITS=604800 $(GO) test -count=1 -timeout 4h -v -run '^(TestNATSStateBoundedOverAWeek|TestDeltaLogBoundedOverAWeek)$$' ./committer/

images: ## build the FROM-scratch images (quarry, nats-server, MinIO) with no registry
	./scripts/images.sh

# The container, chaos and SQL Server suites are their own module (e2e/go.mod),
# so that testcontainers and the Docker client stay out of quarry's go.mod.
e2e: images ## container suites with testcontainers-go: NATS cluster, MinIO, faults (build tag e2e; module e2e/)
	cd e2e && $(GO) test -tags e2e -count=1 -timeout 45m ./...

chaos: build ## the seeded fault harness: every role a process, kills, pauses, store and NATS faults (short round)
	cd e2e && $(GO) test -tags chaos -count=1 -timeout 30m -v ./chaos/ -args -rounds=$${ROUNDS:-3}

soak: build ## a long chaos soak (ROUNDS=50 by default)
	cd e2e && $(GO) test -tags chaos -count=1 -timeout 6h -v ./chaos/ -args -rounds=$${ROUNDS:-50}

e2e-mssql: ## the SQL Server CDC e2e suite (needs the mcr.microsoft.com/mssql/server:2022-latest image locally; skips without it)
	cd e2e && $(GO) test -tags e2e -count=1 -timeout 30m -v ./mssql/...

eval: ## score template mining on Loghub-2k (LOGHUB_DIR or ../shared/loghub2k): plain, leave-one-dataset-out and raw lines; fails below the floors
	$(GO) run ./cmd/loghub-eval -write docs/accuracy.md

bench: build ## run the benchmarks and write docs/benchmarks.md
	./scripts/bench.sh

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd e2e && $(GO) vet $(PKGS) && $(GO) vet -tags e2e $(PKGS) && $(GO) vet -tags chaos $(PKGS)

clean: ## remove build output and local data
	rm -rf bin $(DATA)
