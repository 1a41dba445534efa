# escurel: two commands on a fresh machine.
#   make demo   builds, ingests DEMO_DATA into a fresh index, runs three searches
#   make test   vet, gofmt check, all tests
# Go modules download on first use; gcc (cgo, for DuckDB) is installed with
# apt-get when missing.

GO        ?= go
BIN       := bin/escurel
SHARED_MD := ../shared/data/markdown/fastapi
SHARED_DOCS := ../shared/data/documents

ifneq ($(wildcard $(SHARED_MD)),)
# The FastAPI pages with the real PDFs and Word files (not the corrupt ones:
# the demo should exit 0).
DEMO_DATA   ?= $(SHARED_MD) $(SHARED_DOCS)/pdf $(SHARED_DOCS)/docx
DEMO_QUERY1 ?= how do I declare path parameters with types
DEMO_QUERY2 ?= OAuth2 password flow with JWT tokens
DEMO_QUERY3 ?= row permissions and column masks in DB2
else
DEMO_DATA   ?= .
DEMO_QUERY1 ?= blob store source of truth
DEMO_QUERY2 ?= manifest refuses a mismatched open
DEMO_QUERY3 ?= failed documents are kept
endif
DEMO_INDEX ?= .demo

BENCH_N ?= 100000

# ONNX Runtime for the onnx embedder and its tests: the CPU library that
# the npm package onnxruntime-node carries, fetched with `npm pack` (its
# install script, which downloads from elsewhere, never runs). 1.24.x
# matches the C API (version 24) of github.com/yalue/onnxruntime_go v1.27.0.
ORT_VERSION := 1.24.3
ORT_ARCH    := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x64)
ORT_DIR     := .cache/onnxruntime-$(ORT_VERSION)-$(ORT_ARCH)
ORT_LIB     := $(abspath $(ORT_DIR))/libonnxruntime.so.1

.PHONY: all build deps onnxruntime test bench bench-fts bench-dense bench-smoke bench-switch bench-serve eval demo clean

all: build

deps:
	@command -v gcc >/dev/null 2>&1 || { echo "installing gcc for cgo"; \
		apt-get update -qq && apt-get install -y -qq gcc; }
	$(GO) mod download

build: deps
	$(GO) build -o $(BIN) ./cmd/escurel

onnxruntime: $(ORT_LIB)

$(ORT_LIB):
	@command -v npm >/dev/null 2>&1 || { echo "installing npm to fetch ONNX Runtime"; \
		apt-get update -qq && apt-get install -y -qq npm; }
	rm -rf $(ORT_DIR) && mkdir -p $(ORT_DIR)
	cd $(ORT_DIR) && npm pack --ignore-scripts --silent onnxruntime-node@$(ORT_VERSION) >/dev/null && \
		tar xzf onnxruntime-node-$(ORT_VERSION).tgz package/bin/napi-v6/linux/$(ORT_ARCH)/libonnxruntime.so.1 && \
		mv package/bin/napi-v6/linux/$(ORT_ARCH)/libonnxruntime.so.1 . && rm -rf package onnxruntime-node-$(ORT_VERSION).tgz

# The tests of concurrency and of the generation lifecycle run a second
# time under the race detector (RACE_TESTS in ./tests, and the packages of
# RACE_PKGS whole).
RACE_PKGS  := ./internal/layout ./internal/fusion ./index ./index/fts ./index/dense
# RACE_SKIP: tests that kill a PDF extraction at its time limit. The kill
# closes the wazero module while a PDFium call still runs in it, which the
# race detector reports inside wazero (clockTimeGet against
# ensureResourcesClosed); until the engine is stopped through its context
# instead, these run without -race only.
RACE_SKIP  := RefusesNewFailures|RefusesFailureOfDocumentIngestedDuring|RetriesFailed
RACE_TESTS := Concurren|Never|During|Live|Switch|Swap|Reload|Rebuild|Reembed|Rollback|Closed|Manifest|Lock|Killed|CatchUp
# RACE_PKG_SKIP: tests of RACE_PKGS with no concurrency that build indexes
# at scaled memory limits (about 60 s of the race run, 33 s of it
# TestVerifyBoundedMemory); they run without -race only.
RACE_PKG_SKIP := TestVerifyBoundedMemory|TestReopenFitsStoredIndexes|TestPurgeAfterReopenFitsStoredIndexes|TestOutOfMemoryRaisesAndRetries|TestHitDocMemory
# RACE_BLOB_TESTS: the blob store's tests of Stores and goroutines at
# once (listings during writes and repacks, folds, hidden packs, pack
# numbers taken by two writers): about 20 s under -race.
RACE_BLOB_TESTS := During|Fold|Ghost|Hidden|Race|Concurrent|Seq|Writers|Exclusive|Relist|Repack

test: deps onnxruntime
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	@# The benchmark module is built and vetted so that it cannot rot unseen.
	cd bench/fts && $(GO) vet -tags sqlite_fts5 ./...
	$(MAKE) bench-smoke
	@# The pure-Go packages, tests included, build for Windows and macOS
	@# (the rest needs DuckDB's cgo build for the target).
	GOOS=windows CGO_ENABLED=0 $(GO) vet ./blobstore ./internal/layout
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./blobstore ./internal/layout
	ESCUREL_ONNXRUNTIME_LIB=$(ORT_LIB) $(GO) test ./...
	@# The dense kernels as compiled off x86-64 Linux (arm64, macOS): one
	@# version each, no AVX-512 (index/dense/kernel.c).
	CGO_CFLAGS="-O2 -DDENSE_PORTABLE" $(GO) test ./index/dense
	ESCUREL_ONNXRUNTIME_LIB=$(ORT_LIB) $(GO) test -race -skip '$(RACE_PKG_SKIP)' $(RACE_PKGS)
	$(GO) test -race -run '$(RACE_BLOB_TESTS)' ./blobstore
	ESCUREL_ONNXRUNTIME_LIB=$(ORT_LIB) $(GO) test -race -run '$(RACE_TESTS)' -skip '$(RACE_SKIP)' ./tests

# Benchmarks report ingest docs/s, blocks, index size and search p50/p95 on
# the shared FastAPI pages (skipped when ../shared/data is absent).
bench: deps
	@command -v pdftotext >/dev/null 2>&1 || { echo "installing poppler-utils: pdftotext is the PDF extraction peer"; \
		apt-get update -qq && apt-get install -y -qq poppler-utils || echo "no pdftotext: its benchmark is skipped"; }
	$(GO) test -run '^$$' -bench . -benchtime 3x ./tests/

# escurel against bleve v2.6.3 and SQLite FTS5 on BENCH_N passages (its own
# Go module under bench/fts: the peers never reach escurel's binary).
bench-fts: deps
	cd bench/fts && $(GO) run -tags sqlite_fts5 . -n $(BENCH_N)

# escurel's dense leg and hybrid search against DuckDB's own exact vector
# scan (array_inner_product) on the same BENCH_N passages and hash/384
# vectors.
bench-dense: deps
	cd bench/fts && $(GO) run -tags sqlite_fts5 . -n $(BENCH_N) -engines escurel-hybrid,escurel-dense,duckdb-dense

# The benchmark harness's modes run on 2,000 passages (about 20 s), as
# make test does: a mode that no longer runs (bench-dense's churn,
# bench-serve's and bench-switch's build, both broken a while unseen) fails
# here, not for the next person who runs it. Skipped without the shared data.
BENCH_SMOKE := $(abspath .cache/bench-fts-smoke)
bench-smoke:
ifneq ($(wildcard ../shared/data/scifact/corpus.jsonl),)
	cd bench/fts && $(GO) build -tags sqlite_fts5 -o $(BENCH_SMOKE)/bench .
	rm -rf $(BENCH_SMOKE)/fts $(BENCH_SMOKE)/dense $(BENCH_SMOKE)/serve
	cd bench/fts && $(BENCH_SMOKE)/bench -n 2000 -queries 20 -churn 1 -work $(BENCH_SMOKE)/fts
	cd bench/fts && $(BENCH_SMOKE)/bench -n 2000 -queries 20 -work $(BENCH_SMOKE)/dense -engines escurel-hybrid,escurel-dense,duckdb-dense
	cd bench/fts && $(BENCH_SMOKE)/bench -n 2000 -queries 20 -work $(BENCH_SMOKE)/serve -serve -overhead-only
	rm -rf $(BENCH_SMOKE)
else
	@echo "bench-smoke: skipped: ../shared/data/scifact is absent (see ../shared/data/README)"
endif

# Searches (bm25 and hybrid) on BENCH_N passages while a live rebuild runs
# and switches generations: p50/p95/max per phase (bench/fts/switch.go).
bench-switch: deps
	cd bench/fts && $(GO) run -tags sqlite_fts5 . -n $(BENCH_N) -switch

# escurel serve on BENCH_N passages: search over HTTP against in-process
# (the overhead), queries/s with 16 HTTP clients, and p95 over HTTP during
# a live rebuild's switch against idle (bench/fts/serve.go).
bench-serve: deps
	cd bench/fts && $(GO) run -tags sqlite_fts5 . -n $(BENCH_N) -serve

# Retrieval quality on SciFact (BEIR), test split.
eval: build
	$(BIN) eval --beir ../shared/data/scifact
	$(BIN) eval --beir ../shared/data/scifact --mode dense
	$(BIN) eval --beir ../shared/data/scifact --mode hybrid
	$(BIN) eval --beir ../shared/data/scifact --mode hybrid --fusion convex --alpha 0.05

demo: build
	@echo "demo data: $(DEMO_DATA)"
	rm -rf $(DEMO_INDEX)
	$(BIN) --index $(DEMO_INDEX) ingest $(DEMO_DATA)
	@echo
	@echo '$$ escurel search -k 3 "$(DEMO_QUERY1)"'
	@$(BIN) --index $(DEMO_INDEX) search -k 3 "$(DEMO_QUERY1)"
	@echo '$$ escurel search -k 3 "$(DEMO_QUERY2)"'
	@$(BIN) --index $(DEMO_INDEX) search -k 3 "$(DEMO_QUERY2)"
	@echo '$$ escurel search -k 3 "$(DEMO_QUERY3)"'
	@$(BIN) --index $(DEMO_INDEX) search -k 3 "$(DEMO_QUERY3)"
	$(BIN) --index $(DEMO_INDEX) status

clean:
	rm -rf bin $(DEMO_INDEX)
