GO        ?= go
BIN       := bin/orchard
PKGS      := ./...
TESTFLAGS ?=

.PHONY: help build test test-k8s bench lint fmt clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/orchard
	$(GO) build -o $(BIN) ./cmd/orchard

test: ## run every test with the race detector
	$(GO) test -race -count=1 $(TESTFLAGS) $(PKGS)

test-k8s: ## run the Kubernetes backend tests against a real API server
	ORCHARD_K8S_TEST=1 $(GO) test -race -count=1 -run Kube ./envd/...

bench: build ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./proxy/... ./recorder/... ./reconstruct/...

lint: ## go vet
	$(GO) vet $(PKGS)

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output
	rm -rf bin
