# Genesis Sandbox. `make run` and `make test` do all their own set-up.
SHELL := /bin/bash
GO ?= go
BIN := bin
DATA_DIR ?= .data
ADDR ?= 127.0.0.1:8080
# Host set-up needs root; use sudo when not root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -E)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# Images the tests need (the others are built by `make images`); service is
# the base of the service's own image (TestContainerizedService).
TEST_IMAGES ?= tool-basic tool-node code-python-basic code-python-data skill-python-basic browser-playwright desktop-vnc desktop-cloud desktop-browser service

# Fuzz targets of the path policy, each run for FUZZTIME by `make test`.
FUZZ_TARGETS ?= FuzzResolvePath FuzzResolveBelow
FUZZTIME ?= 15s
# The Python SDK's tests run with Debian's python3, httpx, pytest and mypy
# (scripts/host-setup.sh installs them).
PYTHON ?= /usr/bin/python3

.PHONY: proto all build console console-test python-test setup run-setup images images-tool quickstart-images service-image test-images test-deps run test unit fuzz cross lint bench bench-speed bench-targets bench-load bench-cold clean kube-up kube-down test-kube bench-kube

all: build

build: console
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/genesis-agent ./cmd/genesis-agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/genesis-egress ./cmd/genesis-egress
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/sandbox-service ./cmd/sandbox-service
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/genesis ./cmd/genesis

# The web console's front-end (console/, npm packages from its lockfile),
# bundled into internal/console/dist, which sandbox-service embeds.
console:
	cd console && npm ci --no-audit --no-fund --loglevel=warn && npm run --silent build

# The console's unit tests (node's own test runner; no packages needed).
console-test:
	cd console && node --test test/

# The Python SDK (sdk/python): its types (mypy --strict), then its suite
# against a real service under runc and runsc (it builds the binaries itself).
python-test:
	cd sdk/python && MYPYPATH=src $(PYTHON) -m mypy --strict --cache-dir=/dev/null src/genesis_sandbox
	cd sdk/python && $(SUDO) env "PATH=$$PATH" PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q -p no:cacheprovider tests/

# Install Docker, debootstrap, busybox, gVisor runsc, Node.js and npm, and
# the tests' Chromium, if missing; start dockerd.
setup:
	$(SUDO) bash scripts/host-setup.sh

# setup without Chromium, which only the tests use.
run-setup:
	$(SUDO) env GENESIS_SETUP_CHROMIUM=0 bash scripts/host-setup.sh

# Build every profile image (cached by recipe hash: present images are skipped).
images: setup build
	$(SUDO) $(BIN)/sandbox-service images build

# The service's own container image, genesis/sandbox-service:latest, for
# running Genesis in a container against the host's Docker (Docker Desktop
# on macOS and Windows: docs/docker-desktop.md). Static Linux binaries into
# bin/image/, then the Debian base of images/service (debootstrap, cached by
# its recipe hash) plus them. Nothing is pulled; no build engine is needed.
service-image: setup console
	@mkdir -p $(BIN)/image
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/image/ ./cmd/sandbox-service ./cmd/genesis ./cmd/genesis-agent ./cmd/genesis-egress
	$(SUDO) $(BIN)/image/sandbox-service images build-service

test-images: setup build
	$(SUDO) $(BIN)/sandbox-service images build $(addprefix --profile ,$(TEST_IMAGES))

# The image builder alone (sandbox-service images without the service): it
# compiles in seconds, where the service takes minutes on a fresh machine.
images-tool:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/genesis-images ./cmd/genesis-images

# The images the README's quickstart uses.
QUICKSTART_IMAGES ?= tool-basic code-python-basic

quickstart-images: run-setup images-tool
	$(SUDO) $(BIN)/genesis-images build $(addprefix --profile ,$(QUICKSTART_IMAGES))

# `make run` builds the quickstart's images while the service compiles,
# then serves and builds the other profiles' images in the background
# (--build-images): the first sandbox comes minutes after a fresh start,
# not after every image (`genesis images` shows their progress).
run: run-setup
	$(MAKE) --no-print-directory -j2 build quickstart-images
	$(SUDO) $(BIN)/sandbox-service serve --addr $(ADDR) --data-dir $(DATA_DIR) --admin-key-file $(DATA_DIR)/admin_key --build-images

# The npm packages the tests run (the TypeScript MCP SDK's client,
# Playwright's client), from their lockfiles.
test-deps: setup
	cd test/mcpclient && npm ci --no-audit --no-fund --loglevel=warn
	cd test/browserclient && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn
	cd test/e2bclient && npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn
	cd test/osclient && npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn
	cd tools/proto && npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn

# Unit, conformance, integration (real Docker, runc and runsc) and end-to-end tests.
#
# Where its time goes is printed as it runs: each phase is timed
# (scripts/phase; the table comes last and stays in $(PHASE_LOG)), and the
# Go tests run with -json into $(TESTJSON), whose slowest packages, tests
# and subtests scripts/gotest-summary.py prints after them (run it on that
# file again, e.g. with --package e2e --top 50, for more). ./test/e2e/ is
# named first: go test starts a package's run only once every package
# named before it is built and prefers their runs, and e2e is the longest
# run by far, so it starts at once and the others run beside it. The
# steps of TEST_BESIDE run beside the Go tests too (their output follows
# theirs); fuzz runs last on its own, so its FUZZTIME gets the CPUs.
TESTJSON ?= $(BIN)/test.json
PHASE_LOG ?= $(BIN)/test-phases.txt
TEST_BESIDE ?= console-test python-test lint
TEST_PKGS ?= ./test/e2e/ ./...
export PHASE_LOG

test:
	@mkdir -p $(BIN) && rm -f $(PHASE_LOG)
	@scripts/phase prepare $(MAKE) --no-print-directory -j3 -Otarget test-images test-deps cross
	@set -uo pipefail; rc=0; logs=$$(mktemp -d); pids=(); \
	for t in $(TEST_BESIDE); do \
		scripts/phase $$t $(MAKE) --no-print-directory $$t >"$$logs/$$t.log" 2>&1 & pids+=($$!); \
	done; \
	scripts/phase go-test bash -c 'set -o pipefail; $(SUDO) env "PATH=$$PATH" $(GO) test -json -race -count=1 -timeout 30m $(TEST_PKGS) 2>&1 \
		| tee $(TESTJSON) | $(PYTHON) scripts/gotest-summary.py --stream --top 20' || rc=1; \
	for p in "$${pids[@]}"; do wait "$$p" || rc=1; done; \
	for t in $(TEST_BESIDE); do echo; cat "$$logs/$$t.log"; done; rm -rf "$$logs"; \
	[ $$rc = 0 ] && scripts/phase fuzz $(MAKE) --no-print-directory fuzz || rc=1; \
	echo; scripts/phase --report; exit $$rc

# go vet and staticcheck, pinned by tools/lint/go.mod (built once into bin/;
# a module of its own, so the service's go.mod does not carry it).
STATICCHECK := $(BIN)/staticcheck
lint: $(STATICCHECK)
	$(GO) vet ./...
	$(GO) vet -tags kube ./test/kube/ ./internal/driver/kube/...
	$(STATICCHECK) ./...

$(STATICCHECK): tools/lint/go.mod tools/lint/go.sum
	@mkdir -p $(BIN)
	cd tools/lint && $(GO) build -o ../../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

# The CLI also builds for macOS and Windows (compile only; a few seconds).
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/genesis
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/genesis

# The path-policy fuzz targets for FUZZTIME each; a finding fails the run
# (its input is saved under internal/agent/agentproto/testdata/fuzz).
fuzz:
	@set -e; for f in $(FUZZ_TARGETS); do \
		echo "fuzz $$f for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./internal/agent/agentproto/; \
	done
	$(GO) test -run '^$$' -fuzz '^FuzzSandboxPath$$' -fuzztime $(FUZZTIME) ./internal/compat/e2b/
	$(GO) test -run '^$$' -fuzz '^FuzzOriginsMatch$$' -fuzztime $(FUZZTIME) ./internal/ports/

# Unit tests only (no Docker needed; integration tests skip with a reason).
unit:
	$(GO) test -race -count=1 ./...

# Every benchmark, once each (test/bench/doc.go lists them). Issue 40's
# figures, each beside its comparison with the verdict of its target and
# the load average, in ONE table: `make bench-targets` (below; bench does
# not run it). Two more targets run a part on its own: `make bench-speed`
# (the headline speed figures against the service built from git rev
# BASE) and `make bench-load` (one host, 200 sandboxes, execs at
# concurrency 32; docs/performance.md).
bench: test-images test-deps
	$(SUDO) env "PATH=$$PATH" $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./test/bench/ ./internal/egress/gateway/
	$(SUDO) env "PATH=$$PATH" $(GO) test -run '^$$' -bench BenchmarkQuotaLock -benchtime 2000x ./internal/store/postgres/
	@echo "issue 40's targets in one table, against a baseline build: make bench-targets BASE=<rev>"

# The shell (one line) of a recipe that builds sandbox-service,
# genesis-agent and genesis-egress of git rev BASE from `git archive` in a
# temporary directory (removed on exit) and sets base to its
# sandbox-service and rev to its short hash; both empty when BASE is.
BUILD_BASE = tmp=$$(mktemp -d /tmp/genesis-base-XXXXXX); trap 'rm -rf "$$tmp"' EXIT; base=""; rev=""; \
	if [ -n "$(BASE)" ]; then \
		rev=$$(git rev-parse --short "$(BASE)^{commit}"); \
		echo "building the baseline, $$rev, in $$tmp"; \
		mkdir -p "$$tmp/src" "$$tmp/bin"; \
		git archive --format=tar "$$rev" | tar -x -C "$$tmp/src"; \
		(cd "$$tmp/src" && CGO_ENABLED=0 $(GO) build -trimpath -o "$$tmp/bin/" ./cmd/genesis-agent ./cmd/genesis-egress \
			&& $(GO) build -trimpath -o "$$tmp/bin/" ./cmd/sandbox-service); \
		base="$$tmp/bin/sandbox-service"; \
	fi

# BenchmarkSpeed (test/bench/speed_test.go): exec round trip over HTTP and
# gRPC, warm lease → first echo and release, cold create → first output,
# under runc and runsc, with p50/p90/p99 beside the same figures of the
# build of git rev BASE (BUILD_BASE, run as a second service), the agent
# alone, `docker exec` and `docker run`, and the load average during the
# run. BASE= (empty) measures this build alone.
BASE ?= 2086070
bench-speed: test-images
	@set -e; $(BUILD_BASE); \
	$(SUDO) env "PATH=$$PATH" GENESIS_BENCH_BASELINE_BIN="$$base" GENESIS_BENCH_BASELINE_REV="$$rev" \
		$(GO) test -run '^$$' -bench '^(BenchmarkSpeed|BenchmarkExecHops)$$' -benchtime 1x -timeout 90m ./test/bench/

# Issue 40's done-criterion (BenchmarkTargets, test/bench/targets_bench_test.go):
# every figure of its targets in one run, each against the build of git
# rev BASE (BUILD_BASE) where the benchmark takes a baseline and against
# docker exec / docker run / the agent alone / direct CDP / a direct stdio
# MCP call, each part printing its own table; then one summary table
# (figure, runtime, p50/p90/p99, comparisons, target, verdict) with the
# load average over the run, also written to TARGETS_OUT. The load step
# (200 sandboxes, the longest) runs last; LOAD=0 leaves it out. The
# GENESIS_BENCH_* knobs of each part still apply (docs/performance.md).
TARGETS_OUT ?= $(BIN)/bench-targets.md
LOAD ?=
bench-targets: test-images
	@set -e; $(BUILD_BASE); \
	$(SUDO) env "PATH=$$PATH" GENESIS_BENCH_TARGETS=1 GENESIS_BENCH_TARGETS_OUT="$(abspath $(TARGETS_OUT))" \
		$(if $(LOAD),GENESIS_BENCH_TARGETS_LOAD="$(LOAD)") \
		GENESIS_BENCH_BASELINE_BIN="$$base" GENESIS_BENCH_BASELINE_REV="$$rev" \
		$(GO) test -run '^$$' -bench '^BenchmarkTargets$$' -benchtime 1x -timeout 120m ./test/bench/

# BenchmarkLoad (test/bench/load_test.go) alone: GENESIS_BENCH_LOAD_* scale it.
bench-load: test-images
	$(SUDO) env "PATH=$$PATH" $(GO) test -run '^$$' -bench '^BenchmarkLoad$$' -benchtime 1x -timeout 60m ./test/bench/

# Cold create → first output against docker run of the same image, interleaved
# (issue 40's third figure), with the per-step timeline; GENESIS_BENCH_ITERS
# creates per runtime (default 100).
bench-cold: test-images test-deps
	$(SUDO) env "PATH=$$PATH" $(GO) test -run '^$$' -bench BenchmarkColdCreate -benchtime 1x -timeout 30m ./test/bench/

clean:
	rm -rf $(BIN)

# The Connect-RPC code of the gRPC edge (proto/ → gen/) and of the E2B
# adapter (internal/compat/e2b/proto), generated by buf (npm, tools/proto's
# lockfile) with protoc-gen-go and protoc-gen-connect-go run by `go run` at
# go.mod's versions. The output is committed; run this after editing a
# .proto. The last step records the hashes of proto/ and gen/ in
# gen/genesis/sandbox/v1/SOURCES; TestGeneratedCodeIsFresh fails when either
# changed without a `make proto`.
proto:
	cd tools/proto && npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn
	rm -rf internal/compat/e2b/gen
	cd internal/compat/e2b/proto && ../../../../tools/proto/node_modules/.bin/buf generate
	cd proto && ../tools/proto/node_modules/.bin/buf lint
	rm -rf gen/genesis
	cd proto && ../tools/proto/node_modules/.bin/buf generate
	$(GO) test ./proto/ -count=1 -run '^TestGeneratedCodeIsFresh$$' -args -update

# A single-node Kubernetes control plane on this host for the Kubernetes
# driver (docs/kubernetes-dev.md): built from the Go module proxy at
# pinned versions into /var/cache/genesis-kube, brought up and taken away
# by hack/kube. `make test-kube` runs the driver's conformance suite and
# the service's tests on it, then takes the plane away (.ci/run runs it
# after `make test`); `make bench-kube` compares first output on Pods and
# on Docker.
KUBE_ENV = GENESIS_KUBECONFIG=/var/lib/genesis-kube/admin.kubeconfig GENESIS_KUBE_CONTAINERD=/run/genesis-kube/containerd.sock

kube-up: test-images
	$(SUDO) env "PATH=$$PATH" hack/kube/up.sh

kube-down:
	$(SUDO) env "PATH=$$PATH" hack/kube/down.sh

test-kube: kube-up
	rc=0; $(SUDO) env "PATH=$$PATH" $(KUBE_ENV) $(GO) test -tags kube -count=1 -timeout 30m ./internal/driver/kube/ ./test/kube/ || rc=$$?; \
	$(MAKE) kube-down; exit $$rc

bench-kube: kube-up
	$(SUDO) env "PATH=$$PATH" $(KUBE_ENV) $(GO) test -tags kube -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/kube/
