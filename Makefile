# bq's developer tasks. Every target works from a fresh clone.
#
#   make test   ensure the test databases (installing/starting PostgreSQL
#               if needed), then run every test with the race detector
#   make lint   gofmt, go vet, staticcheck
#   make demo   the self-contained demo (SQLite in a temp dir; no server)
#   make build  compile everything, including the bq binary

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
STATICCHECK_VERSION := v0.8.2
# Where `go install` puts binaries: $GOBIN, else $GOPATH/bin.
GOBIN_DIR := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)
STATICCHECK := $(GOBIN_DIR)/staticcheck

# The databases the tests run on (comma list; MySQL comes later), and where
# PostgreSQL is. Override either from the environment.
export BQ_TEST_DRIVERS ?= sqlite,postgres
export BQ_TEST_POSTGRES_DSN ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable

.PHONY: test lint demo build ensure-databases staticcheck

test: ensure-databases
	$(GO) test -race -count=1 -timeout 20m ./...

ensure-databases:
	scripts/ensure-databases.sh

lint: staticcheck
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# Installs the pinned staticcheck unless that version is already there.
staticcheck:
	@if ! "$(STATICCHECK)" -version 2>/dev/null | grep -q "($(STATICCHECK_VERSION:v%=%))"; then \
		echo "installing staticcheck $(STATICCHECK_VERSION) into $(GOBIN_DIR)"; \
		GOBIN="$(GOBIN_DIR)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

demo:
	$(GO) run ./bq demo

build:
	$(GO) build ./...
