# The two commands that matter are `make run` and `make test`; both bring up
# what they need (a private Postgres and an in-process Temporal server)
# through bin/devstack, which lives in its own module so the Temporal
# server's dependency tree never reaches the product binary.

SHELL := /bin/bash
GO ?= go
TOOL := $(GO) tool -modfile=tools.mod
# The test stack: a fresh Postgres and Temporal of its own each run, in its
# own folder and on its own ports, so `make test` runs beside `make run`.
TEST_ROOT ?= $(CURDIR)/.devstack/test
TEST_PG_PORT ?= 55433
TEST_TEMPORAL_PORT ?= 7243
TEST_STACK := bin/devstack -root $(TEST_ROOT) -pg-port $(TEST_PG_PORT) -temporal-port $(TEST_TEMPORAL_PORT)
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report its own deadline as a failure with no crasher (go.dev/issue/75804,
# fixed in Go 1.27), which failed `make test` once on a loaded machine.
# About 10 s a target at the measured 30,000-40,000 execs/s.
FUZZTIME ?= 300000x
# The walk-through's server, inside the test stack.
TS_ADDR ?= 127.0.0.1:18080
TS_TOKEN := walkthrough-admin-token-0123456789
RUN_ADMIN_TOKEN ?= sluice-dev-admin-token
# Targets HTTP_REQUEST nodes may reach under `make run`.
RUN_HTTP_NODE_ALLOW ?= 127.0.0.0/8,::1/128
# The key that seals webhook signing secrets under `make run`, for local
# use only (32 bytes in base64); set SLUICE_WEBHOOK_SECRET_KEY to your own.
RUN_WEBHOOK_SECRET_KEY ?= c2x1aWNlLWRldi13ZWJob29rLXNlY3JldC1rZXktMzI=

.PHONY: all build run test test-fast test-go bench-smoke soak test-race test-ts vet lint generate check-generated fuzz bench lint-spec console-check ts-deps browser promtool check-rules image ca-certificates clean

all: build

# What `sluice version` and the image's labels say: the nearest tag (or
# the commit) and the commit it was built from.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The image's time stamps: the commit's time, so a rebuild of one commit
# gives the same image.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
VERSION_LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(REVISION)

bin/sluice: FORCE
	$(GO) build -ldflags '$(VERSION_LDFLAGS)' -o bin/sluice ./cmd/sluice

# The example team's Temporal worker (examples/teamservice), which the
# TypeScript client's test gates.
bin/teamworker: FORCE
	$(GO) build -o bin/teamworker ./examples/teamservice/teamworker

bin/devstack: FORCE
	cd cmd/devstack && $(GO) build -o ../../bin/devstack .

build: bin/sluice bin/devstack

## run: start Postgres, Temporal, the migrations and `sluice all` on :8080.
## HTTP_REQUEST nodes may reach loopback here, for local services; the
## binary's own default refuses every private and local address.
run: build
	SLUICE_ADMIN_TOKEN="$${SLUICE_ADMIN_TOKEN:-$(RUN_ADMIN_TOKEN)}" SLUICE_HTTP_NODE_ALLOW="$${SLUICE_HTTP_NODE_ALLOW-$(RUN_HTTP_NODE_ALLOW)}" \
	SLUICE_WEBHOOK_SECRET_KEY="$${SLUICE_WEBHOOK_SECRET_KEY:-$(RUN_WEBHOOK_SECRET_KEY)}" bin/devstack -- bash -c 'bin/sluice migrate && exec bin/sluice all'

## test: vet, lint, spec lint, generated-code drift, then unit, integration,
## fuzz, the console's browser test and the TypeScript walk-through on a
## fresh real stack.
test: vet lint lint-spec console-check check-generated check-rules build browser
	rm -rf $(TEST_ROOT) && mkdir -p $(TEST_ROOT)
	$(TEST_STACK) -- bash -c 'cd $(CURDIR) && SLUICE_REQUIRE_INTEGRATION=1 $(MAKE) --no-print-directory test-go test-ts'

# The fast tier: every package but the end-to-end suites that run a
# Temporal worker, spawn processes or drive a browser (e2e/dispatch,
# e2e/engine, e2e/faults, e2e/console, e2e/bench). e2e/api is in: its
# server runs in the test process, and Temporal only accepts the workflows
# it starts (no worker runs them). Its few tests that start a whole sluice,
# worker included (harness.StartSluiceWith), skip under -short, saying so;
# `make test` passes no -short and runs them. The stack is devstack's, as
# for `make test`.
FAST_PACKAGES := . ./domain/... ./ports/... ./app/... ./adapters/... ./api/... ./db/... ./docs/... ./cmd/sluice/... ./e2e/api/...

## test-fast: unit, contract and API tests on a fresh stack, in minutes;
## `make test` runs these and the rest.
test-fast: bin/devstack
	rm -rf $(TEST_ROOT) && mkdir -p $(TEST_ROOT)
	$(TEST_STACK) -- bash -c 'cd $(CURDIR) && SLUICE_REQUIRE_INTEGRATION=1 $(GO) test -short -count=1 -timeout 20m $(FAST_PACKAGES)'

# The end-to-end suites run one package at a time, after the rest, as
# they did as one package: several timing figures they assert would
# otherwise share the two cores with another suite's whole stack.
test-go:
	$(GO) test -count=1 -timeout 40m $$($(GO) list ./... | grep -v '/e2e/')
	$(GO) test -count=1 -p 1 -timeout 40m ./e2e/...
	$(MAKE) --no-print-directory bench-smoke
	cd cmd/devstack && $(GO) test -count=1 ./...
	cd deploy && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory fuzz

# The race detector over every package whose tests run in this process:
# the domain, app, adapters, cmd/sluice and the in-process end-to-end
# suites under e2e/ (the subprocess suites drive a sluice binary, which is
# built without it).
RACE_PACKAGES := ./domain/... ./ports/... ./app/... ./adapters/... ./cmd/sluice/... ./e2e/...

## test-race: the in-process suites under `go test -race`, on a fresh stack.
test-race: build
	rm -rf $(TEST_ROOT) && mkdir -p $(TEST_ROOT)
	$(TEST_STACK) -- bash -c 'cd $(CURDIR) && SLUICE_REQUIRE_INTEGRATION=1 $(GO) test -race -count=1 -timeout 60m $(RACE_PACKAGES)'

# The README's walk-through through the TypeScript client, against
# `sluice all` on the stack's own database, and its executeWorkflow
# against the example team's worker on a queue of its own.
TS_TEAM_QUEUE ?= ts-team-billing
test-ts: ts-deps bin/teamworker
	bin/sluice migrate
	@SLUICE_HTTP_ADDR=$(TS_ADDR) SLUICE_ADMIN_ADDR=127.0.0.1:0 SLUICE_ADMIN_TOKEN=$(TS_TOKEN) SLUICE_LOG_LEVEL=warn bin/sluice all & pid=$$!; \
	TEAM_TASK_QUEUE=$(TS_TEAM_QUEUE) bin/teamworker >/dev/null 2>&1 & wpid=$$!; \
	for i in $$(seq 1 100); do curl -sf http://$(TS_ADDR)/healthz >/dev/null && break; sleep 0.2; done; \
	(cd api/typescript && SLUICE_URL=http://$(TS_ADDR) SLUICE_ADMIN_TOKEN=$(TS_TOKEN) TEAM_TASK_QUEUE=$(TS_TEAM_QUEUE) npm test); rc=$$?; \
	kill $$pid $$wpid; wait $$pid $$wpid; exit $$rc

## browser: Debian's chromium, which the console's browser test drives;
## installed only when missing.
browser:
	@command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

## image: the OCI image of every role (deploy/image): the static binary
## (CGO off) FROM scratch with the CA certificates and the time-zone
## database, as user 65532. Writes bin/image/oci (an OCI layout) and
## bin/image/sluice.tar (for docker or podman load), checks them and prints
## the size. No daemon, no registry, no base image.
image: ca-certificates
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '-s -w $(VERSION_LDFLAGS)' -o bin/sluice-linux-amd64 ./cmd/sluice
	mkdir -p bin/image
	cd deploy && $(GO) run ./image -binary ../bin/sluice-linux-amd64 -layout ../bin/image/oci -tarball ../bin/image/sluice.tar \
		-tag sluice:$(VERSION) -version $(VERSION) -revision $(REVISION) -source-date-epoch $(SOURCE_DATE_EPOCH)

## ca-certificates: Debian's CA bundle, which the image ships; installed
## only when missing.
ca-certificates:
	@test -s /etc/ssl/certs/ca-certificates.crt || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ca-certificates)

## promtool: Debian's prometheus package, whose promtool checks and
## unit-tests the alert rules; installed only when missing.
promtool:
	@command -v promtool >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus)

## check-rules: the alert and recording rules in deploy/prometheus pass
## promtool's checks and their unit tests (a firing and a silent case per
## alert). That every metric they name is served is checked by
## deploy/check against a running stack, in test-go.
check-rules: promtool
	promtool check rules deploy/prometheus/sluice.rules.yaml
	cd deploy/prometheus && promtool test rules sluice.rules_test.yaml

ts-deps:
	cd api/typescript && npm ci --no-audit --no-fund

lint-spec: ts-deps
	cd api/typescript && npm run lint:spec

## console-check: type-check the console's modules (// @ts-check, JSDoc)
## against the TypeScript client's generated schema, with the client's tsc.
console-check: ts-deps
	cd api/typescript && npx tsc -p ../../adapters/console/tsconfig.json

fuzz:
	@for target in FuzzParseTemplate FuzzResolve FuzzDecodeGraph; do \
		echo "fuzz $$target -fuzztime=$(FUZZTIME)"; \
		$(GO) test ./domain/ -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

vet:
	$(GO) vet ./...
	cd cmd/devstack && $(GO) vet ./...
	cd deploy && $(GO) vet ./...

# One package at a time by default: the machines have two cores. Parallel
# runners are allowed because several checkouts on one machine may lint at
# once, and golangci-lint's machine-wide lock would fail the second.
LINT_CONCURRENCY ?= 1

## lint: golangci-lint with .golangci.yml, and Temporal's workflowcheck
## over the workflow code (its overrides, each argued, are in
## adapters/engine/workflowcheck.yaml). Both are pinned in tools.mod.
## cmd/devstack gets vet only: linting it analyses the whole Temporal
## server it embeds, over 3 GB and minutes of CPU, for four small files.
lint:
	$(TOOL) golangci-lint run --allow-parallel-runners --concurrency $(LINT_CONCURRENCY) ./...
	$(TOOL) workflowcheck -config adapters/engine/workflowcheck.yaml ./adapters/engine/...

## generate: regenerate sqlc, oapi-codegen (server and Go client) and TypeScript client output.
generate: ts-deps
	$(TOOL) sqlc generate
	$(TOOL) oapi-codegen -config api/oapi-server.yaml openapi.yaml
	$(TOOL) oapi-codegen -config api/client/oapi-client.yaml openapi.yaml
	cd api/typescript && npm run generate

GENERATED := adapters/postgres/dbsqlc api/server.gen.go api/client api/typescript/src
check-generated: generate
	@git diff --exit-code -- $(GENERATED) || { echo "generated code is out of date: run make generate and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED))" || { git status --porcelain -- $(GENERATED); echo "untracked generated files: run make generate and commit" >&2; exit 1; }

# Every benchmark of `make bench`, those of e2e/bench at a tiny size
# (SLUICE_BENCH_SMOKE=1), so that `make test` fails when a benchmark would:
# the same seeding, drains, processes and checks, in about a minute and a
# half on a loaded machine. Their figures measure nothing and are printed
# as a smoke run's, with no verdict. The template benchmark of
# adapters/nodes and the triggers' cost of adapters/postgres are small
# already and run whole. Needs the test stack.
bench-smoke:
	SLUICE_BENCH_SMOKE=1 $(GO) test -count=1 -run='^$$' -bench=. -benchtime=1x -timeout 10m ./adapters/nodes/ ./adapters/postgres/ ./e2e/bench/

# Where `make bench` writes what it prints, headed by the commit, the date,
# the machine and the Go toolchain, so that figures quoted in
# docs/benchmarks.md can be traced to the run that measured them.
BENCH_RESULTS ?= docs/bench-results.txt

## bench: throughput, latency and memory benchmarks on the real stack; they
## print their figures, and BENCH_RESULTS keeps a copy.
bench: build
	rm -rf $(TEST_ROOT) && mkdir -p $(TEST_ROOT)
	set -o pipefail; { \
	  echo "# make bench"; \
	  echo "commit:  $(REVISION)$$(git diff --quiet HEAD -- . ':!$(BENCH_RESULTS)' 2>/dev/null || echo ' (with uncommitted changes)')"; \
	  echo "date:    $$(date -u +%Y-%m-%dT%H:%M:%SZ)"; \
	  echo "machine: $$(uname -srm), $$(nproc) cores, $$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $$(awk '/^MemTotal/ {printf "%.1f GiB", $$2 / 1048576}' /proc/meminfo)"; \
	  echo "go:      $$($(GO) version)"; \
	  echo "load:    $$(cut -d' ' -f1-3 /proc/loadavg) (1, 5 and 15 min averages, at the start)"; \
	  echo; \
	  $(TEST_STACK) -- bash -c 'cd $(CURDIR) && $(GO) test -run="^$$" -bench=. -benchtime=1x -timeout 60m ./...'; \
	  echo; \
	  echo "load:    $$(cut -d' ' -f1-3 /proc/loadavg) (1, 5 and 15 min averages, at the end)"; \
	} 2>&1 | tee $(BENCH_RESULTS)

# The growth test at the issue's size: five minutes of a workload of 1,000
# feed events a second and more, where `make test` runs it for one (see
# docs/benchmarks.md#soak). It prints its figures every 5 s and at the end.
SOAK_SECONDS ?= 300

## soak: the growth test for SOAK_SECONDS (5 minutes), on a fresh stack.
soak: build
	rm -rf $(TEST_ROOT) && mkdir -p $(TEST_ROOT)
	set -o pipefail; $(TEST_STACK) -- bash -c 'cd $(CURDIR) && SLUICE_REQUIRE_INTEGRATION=1 SLUICE_TEST_GROWTH_SECONDS=$(SOAK_SECONDS) $(GO) test -count=1 -v -timeout 30m \
	  -run "^TestAFastWorkloadKeepsTheFeedWithinItsRetentionAndDeliveriesWithinTheirBound$$" ./e2e/engine/' | grep -v '^{'

clean:
	rm -rf bin

FORCE:
