GO        ?= go
BIN       := bin/orchard
PKGS      := ./...
TESTFLAGS ?=

.PHONY: help build image test test-k8s bench bench-count lint fmt clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/orchard, bin/orchard-agent (the in-sandbox agent) and bin/orchard-bench
	$(GO) build -o $(BIN) ./cmd/orchard
	CGO_ENABLED=0 $(GO) build -o bin/orchard-agent ./envd/agent/cmd/orchard-agent
	$(GO) build -o bin/orchard-bench ./cmd/orchard-bench

IMAGE_OUT ?= bin
IMAGE_REF ?= ghcr.io/orchard-rl/orchard:latest
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

image: ## build the OCI image without Docker: $(IMAGE_OUT)/orchard-oci (OCI layout) and $(IMAGE_OUT)/orchard-image.tar (docker load)
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w -buildid=' -o $(IMAGE_OUT)/orchard-static ./cmd/orchard
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./cmd/orchard-image --binary $(IMAGE_OUT)/orchard-static \
		--out-dir $(IMAGE_OUT) --ref $(IMAGE_REF) --version $(VERSION) --commit $(COMMIT)

test: ## run every test with the race detector
	$(GO) test -race -count=1 -timeout 30m $(TESTFLAGS) $(PKGS)

K8S_BIN ?= $(HOME)/.cache/orchard-k8s/bin

test-k8s: ## build (once, cached) etcd + kube-apiserver + kwok, then run the Kubernetes backend tests
	test -x $(K8S_BIN)/kube-apiserver || nice -n 19 deploy/testenv/build-bins.sh $(K8S_BIN) || test -x $(K8S_BIN)/kube-apiserver
	ORCHARD_K8S_BIN=$(K8S_BIN) ORCHARD_K8S_TEST=1 $(GO) test -race -count=1 -run Kube ./envd/kube/

bench: build ## load benchmark side by side (docs/bench/*.json) + package benchmarks
	bin/orchard-bench --bin $(BIN) --rounds 2 --out-dir docs/bench
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 200x ./proxy/ ./recorder/... ./reconstruct/ ./cmd/orchard-bench ./envd/local/ ./envd/agent/

# bench-count: the per-event and per-call work counted in instructions (valgrind's callgrind), which
# repeat within about 0.5% from run to run where wall time spreads by tens of percent on a shared VM.
# Each entry is package:benchmark:n: a run of 2n iterations less one of n, over n, is one iteration
# (an episode of the load's eight turns; for RecordEpisode, 512 calls: 64 such episodes written to
# the embedded store). GOGC=off keeps the collector's write barriers, which follow its timing, out of
# the count. Under valgrind SHA-256 runs its AVX2 code, not SHA-NI: the record path's hashing counts
# for more than it costs.
COUNT_BENCHES := proxy:StripAssemble/episode:30 assemble:StreamEpisode:30 \
	proxy:RecordEpisode/store:5 proxy:RecordEpisode/store-tokens:5

bench-count: ## instructions per op of the token path's strip+assemble, the plain path's assembly and the record path (needs valgrind)
	@command -v valgrind >/dev/null || { echo "bench-count needs valgrind: apt-get install -y valgrind"; exit 1; }
	$(GO) test -c -o bin/proxy.test ./proxy
	$(GO) test -c -o bin/assemble.test ./proxy/assemble
	@for b in $(COUNT_BENCHES); do pkg=$${b%%:*}; rest=$${b#*:}; name=$${rest%:*}; n=$${rest##*:}; \
	  for k in $$n $$((2 * n)); do \
	    GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
	      bin/$$pkg.test -test.run '^$$' -test.bench "$$name\$$" -test.benchtime $${k}x 2>&1 | \
	      sed -n 's/.*Collected : //p' > bin/.count.$$k; \
	  done; \
	  echo "$$name: $$(( ($$(cat bin/.count.$$((2 * n))) - $$(cat bin/.count.$$n)) / n )) instructions per op"; \
	done

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## go vet, staticcheck, gofmt, go.mod tidy, and builds for darwin and linux/arm64
	$(GO) vet $(PKGS)
	$(GO) mod tidy -diff
	$(GO) run $(STATICCHECK) $(PKGS)
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting (make fmt)"; exit 1; }
	GOOS=darwin $(GO) build $(PKGS)
	GOOS=linux GOARCH=arm64 $(GO) build $(PKGS)

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output
	rm -rf bin
