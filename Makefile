# The two commands that matter are `make run` and `make test`; both bring up
# what they need (a private Postgres and an in-process Temporal server)
# through bin/devstack, which lives in its own module so the Temporal
# server's dependency tree never reaches the product binary.

SHELL := /bin/bash
GO ?= go
TOOL := $(GO) tool -modfile=tools.mod
# Test stack: its own data folder and ports, so `make test` runs beside `make run`.
TEST_STACK := bin/devstack -data .devstack/test -fresh -pg-port 55433 -temporal-port 7243
FUZZTIME ?= 10s

.PHONY: all build run test test-go vet generate check-generated fuzz bench lint-spec ts-test clean

all: build

bin/sluice: FORCE
	$(GO) build -o bin/sluice ./cmd/sluice

bin/devstack: FORCE
	cd cmd/devstack && $(GO) build -o ../../bin/devstack .

build: bin/sluice bin/devstack

## run: start Postgres, Temporal, the migrations and `sluice all` on :8080.
run: build
	bin/devstack -- bash -c 'bin/sluice migrate && exec bin/sluice all'

## test: vet, generated-code drift, then unit, integration and fuzz tests on the real stack.
test: vet check-generated build
	$(TEST_STACK) -- $(MAKE) --no-print-directory test-go

test-go:
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) --no-print-directory fuzz

fuzz:
	@for target in FuzzParseTemplate FuzzResolve FuzzDecodeGraph; do \
		echo "fuzz $$target for $(FUZZTIME)"; \
		$(GO) test ./domain/ -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

vet:
	$(GO) vet ./...
	cd cmd/devstack && $(GO) vet ./...

## generate: regenerate sqlc, oapi-codegen (server and Go client) output.
generate:
	$(TOOL) sqlc generate
	$(TOOL) oapi-codegen -config api/oapi-server.yaml openapi.yaml
	$(TOOL) oapi-codegen -config api/client/oapi-client.yaml openapi.yaml

check-generated: generate
	@git diff --exit-code -- adapters/postgres/dbsqlc api || { echo "generated code is out of date: run make generate and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- adapters/postgres/dbsqlc api)" || { git status --porcelain -- adapters/postgres/dbsqlc api; echo "untracked generated files: run make generate and commit" >&2; exit 1; }

## bench: throughput and latency benchmarks on the real Postgres; they print their figures.
bench: build
	$(TEST_STACK) -- $(GO) test -run='^$$' -bench=. -benchtime=1x -timeout 60m ./...

clean:
	rm -rf bin

FORCE:
