# bq's developer tasks (this branch's part; merge into the main Makefile:
# `test` also needs ensure-chromium for the dashboard's browser tests).
#
#   make test   install headless Chromium if needed, then run every test
#               with the race detector (PostgreSQL must be reachable, or set
#               BQ_TEST_DRIVERS=sqlite)
#   make lint   gofmt, go vet, staticcheck

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
export BQ_TEST_DRIVERS ?= sqlite,postgres
export BQ_TEST_POSTGRES_DSN ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable

.PHONY: test lint ensure-chromium

test: ensure-chromium
	$(GO) test -race -count=1 -timeout 20m ./...

ensure-chromium:
	scripts/ensure-chromium.sh

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt: run gofmt -w on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	staticcheck ./...
