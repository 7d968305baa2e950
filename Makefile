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

run: build
	./$(BIN) demo-warehouse data/demo-warehouse.duckdb
	./$(BIN) serve --config $(CONFIG)

# Every test, including the integration tests that start real servers.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m $(TESTFLAGS) ./...

# Go benchmarks, then the end-to-end load driver against a real server,
# then the end-to-end sync of a Postgres table (needs the local PostgreSQL).
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./ingest/...
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 ./engine/... ./connectors/...
	$(GO) run ./integration/loadgen -bin $(BIN)
	$(GO) run ./integration/syncbench -bin $(BIN) -rows 1000000,5000000

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzSplitDecode -fuzztime 60s ./ingest/record/

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
