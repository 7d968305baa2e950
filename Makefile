# Tributary — `make run` starts the demo server, `make test` runs every test.
GO        ?= go
BIN       := bin/tributary
CONFIG    ?= configs/tributary.yaml
TESTFLAGS ?=
# DuckDB's Arrow interface (record batches in and out of the embedded
# warehouse and store) is behind this build tag in duckdb-go.
export GOFLAGS := $(GOFLAGS) -tags=duckdb_arrow

.PHONY: build run test bench fuzz vet fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/tributary

# configs/tributary.yaml takes its secrets from the environment only; the
# values here are demo-only defaults for variables that are not set.
run: build
	./$(BIN) demo-warehouse data/demo-warehouse.duckdb
	TRIBUTARY_DEMO_SECRET="$${TRIBUTARY_DEMO_SECRET:-demo-api-secret}" \
	TRIBUTARY_DEMO_SA_SECRET="$${TRIBUTARY_DEMO_SA_SECRET:-demo-sa-secret}" \
	TRIBUTARY_DEMO_ANALYST_SECRET="$${TRIBUTARY_DEMO_ANALYST_SECRET:-demo-analyst-secret}" \
	./$(BIN) serve --config $(CONFIG)

# Every test, including the integration tests that start real servers.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m $(TESTFLAGS) ./...

# Go benchmarks, then the end-to-end load driver against a real server (the
# embedded store; then the Postgres store with one process and with three,
# each run in a database of its own created on BENCH_PG), then the
# end-to-end sync of a Postgres table (needs the local PostgreSQL), first
# by `tributary sync` into the embedded store, then through `tributary
# serve` (3 imports of a third of the rows each, manual-sync API) on the
# embedded store, on Postgres with one process and with three.
# The one- and three-process Postgres runs preload 1 M events with every
# time at random in 6 hours, so the whole unique index is hot. The history
# run stores BENCH_PG_HISTORY events spread over 2 years in time order, then
# measures live traffic (times in the last 6 hours), on the empty store
# first (-baseline): the index is led by time, so live inserts touch only
# its recent end whatever the history's size. A backfill of old events at
# random times (no -live) touches the whole index instead, and once that
# (~50-90 bytes per event) outgrows shared_buffers (128 MB stock: ~2 M events)
# every event costs an index page read and a dirty page write.
BENCH_PG         ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable
BENCH_PG_PRELOAD ?= 1000000
BENCH_PG_HISTORY ?= 50000000
BENCH_SYNC_ROWS  ?= 1000000
# Mirror (syncbench -mirror, at sync's default memory_limit): its targets
# are stated for 5000000 rows.
BENCH_MIRROR_ROWS ?= 1000000
# The embedded store's history run: BENCH_EMBEDDED_HISTORY events over 2
# years with 10 % re-sent, the server at its default memory budget, killed
# with SIGKILL mid-import after the preload, restarted (timed), measured,
# restarted cleanly (timed), then checked: every acknowledged event stored
# exactly once. 100 M takes ~20-40 minutes and ~8 GB of disk.
BENCH_EMBEDDED_HISTORY ?= 100000000
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./ingest/...
	$(GO) test -run '^$$' -bench . -benchmem ./internal/metrics
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 ./engine/... ./connectors/...
	$(GO) test -run '^$$' -bench 'Transform|ArchiveLines' -benchmem ./migrate/...
	$(GO) test -run '^$$' -bench Migration -benchtime 1x ./migrate/...
	$(GO) run ./integration/loadgen -bin $(BIN)
	$(GO) run ./integration/loadgen -bin $(BIN) -preload $(BENCH_EMBEDDED_HISTORY) -span 17520h -dup 0.1 -restart kill -baseline
	$(GO) run ./integration/loadgen -bin $(BIN) -store '$(BENCH_PG)' -procs 1 -preload $(BENCH_PG_PRELOAD)
	$(GO) run ./integration/loadgen -bin $(BIN) -store '$(BENCH_PG)' -procs 3 -preload $(BENCH_PG_PRELOAD)
	$(GO) run ./integration/loadgen -bin $(BIN) -store '$(BENCH_PG)' -procs 1 -preload $(BENCH_PG_HISTORY) -span 17520h -live 6h -baseline -duration 60s
	$(GO) run ./integration/syncbench -bin $(BIN) -rows 1000000,5000000
	$(GO) run ./integration/syncbench -bin $(BIN) -rows $(BENCH_SYNC_ROWS) -store '$(BENCH_PG)' -procs 3
	$(GO) run ./integration/syncbench -bin $(BIN) -rows $(BENCH_MIRROR_ROWS) -mirror

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzSplitDecode -fuzztime 60s ./ingest/record/
	$(GO) test -run '^$$' -fuzz FuzzCanonical -fuzztime 60s ./ingest/record/
	$(GO) test -run '^$$' -fuzz FuzzFlattenJSON -fuzztime 60s ./engine/mapping/
	$(GO) test -run '^$$' -fuzz FuzzScanMatchesTree -fuzztime 60s ./migrate/amplitude/

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
