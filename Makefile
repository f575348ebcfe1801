# The two entry points a newcomer needs are `make demo` and `make test` (see README.md).
GO      ?= go
export GOTOOLCHAIN := local
BUILDER := $(GO) run go.opentelemetry.io/collector/cmd/builder@v0.165.0
DIST    := _build/otelcol-windowaggregator/otelcol-windowaggregator
# The gateway tier (README, "Scaling out"): the load-balancing exporter is served only at v0.161.0,
# so this distribution is built with that release's builder and modules, on its own.
GATEWAY_BUILDER := $(GO) run go.opentelemetry.io/collector/cmd/builder@v0.161.0
GATEWAY := _build/otelcol-windowaggregator-gateway/otelcol-windowaggregator-gateway
LOADGEN := _build/loadgen
WINDOWPRINT := _build/windowprint
PROMETHEUS := _build/prometheus/usr/bin/prometheus
SOURCES := $(shell git ls-files '*.go' go.mod go.sum 2>/dev/null)

.PHONY: test demo dist loadgen windowprint prometheus fuzz bench generate prerequisites

# What `make test` needs besides Go and make, checked first: each missing one is named with the
# command that installs it (README, "Try it"), instead of a test failing deep inside.
# Chromium is looked up on PATH (Debian's package puts it in /usr/bin); the browser test runs the one
# found here.
CHROMIUM ?= $(shell command -v chromium 2>/dev/null)
export CHROMIUM
prerequisites:
	@missing=0; \
	if ! $(GO) version >/dev/null 2>&1; then echo "missing: Go 1.26 (https://go.dev/dl/)"; missing=1; \
	elif ! $(GO) version | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])'; then echo "Go 1.26 or newer is needed, found: $$($(GO) version)"; missing=1; fi; \
	if [ ! -x $(PROMETHEUS) ]; then \
	  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then \
	    echo "missing: apt-get and dpkg, to fetch Debian's prometheus package into _build/ (a Debian or Ubuntu machine)"; missing=1; \
	  elif ! apt-cache show prometheus >/dev/null 2>&1; then \
	    echo "missing: the package lists that name Debian's prometheus; run: sudo apt-get update"; missing=1; fi; \
	fi; \
	if [ -z "$(CHROMIUM)" ] || [ ! -x "$(CHROMIUM)" ]; then \
	  echo "missing: Debian's chromium on PATH, for the browser test of the operator view; run: sudo apt-get install -y chromium"; missing=1; fi; \
	if [ $$missing -ne 0 ]; then echo "(.ci/run installs the Debian packages: it runs apt-get update, and installs chromium)"; exit 1; fi

# Every test, the end-to-end one included (it builds the distribution first; the Prometheus tests
# run the Prometheus server below).
test: prerequisites prometheus
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run ./scripts/structure -check $$($(GO) list -f '{{.Dir}}' ./...) $$(cd bench && $(GO) list -f '{{.Dir}}' ./...)
	$(GO) test -race -count=1 -timeout 20m ./...
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(MAKE) fuzz

# A short run of every fuzz target, on top of the committed seed corpora that `go test` replays. A
# count of executions rather than a duration: a duration can end while an input is running, which Go
# reports as a failure ("context deadline exceeded") on a loaded machine. Minimizing each new
# interesting input is bounded by a count too: by default Go spends up to a minute on each.
FUZZTIME ?= 20000x
FUZZFLAGS = -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
fuzz:
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzConfig$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzIngestTraces$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzIngestLogs$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzIngestMetrics$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzTraceFields$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzLogFields$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzMetricFields$$' .
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzIngest$$' ./internal/engine/stream/
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzUnmarshal$$' ./internal/engine/sketch/
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzDecode$$' ./internal/engine/serieskey/
	$(GO) test $(FUZZFLAGS) -fuzz '^FuzzDecode$$' ./internal/dedup/

# The collector distributions, rebuilt when the component or their builder config changes.
dist: $(DIST) $(GATEWAY)
$(DIST): builder-config.yaml $(SOURCES)
	@mkdir -p _build
	$(BUILDER) --config builder-config.yaml
$(GATEWAY): builder-config-gateway.yaml
	@mkdir -p _build
	$(GATEWAY_BUILDER) --config builder-config-gateway.yaml

# Prometheus 2.42, the server the end-to-end tests scrape into and remote-write into: Debian's
# package, unpacked into _build/prometheus (apt-get download and dpkg -x install nothing and start no
# service; it needs the package lists, from apt-get update, which .ci/run runs). Fetched only when the
# binary is missing. As root, apt warns that it downloads "unsandboxed" (its _apt user cannot write
# into the private temporary directory): harmless.
prometheus: $(PROMETHEUS)
$(PROMETHEUS):
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	( cd "$$tmp" && apt-get download prometheus ); \
	rm -rf _build/prometheus; mkdir -p _build/prometheus; \
	dpkg -x "$$tmp"/prometheus_*.deb _build/prometheus
	$(PROMETHEUS) --version

loadgen: $(LOADGEN)
$(LOADGEN): $(SOURCES)
	@mkdir -p _build
	$(GO) build -o $(LOADGEN) ./cmd/loadgen

windowprint: $(WINDOWPRINT)
$(WINDOWPRINT): $(SOURCES)
	@mkdir -p _build
	$(GO) build -o $(WINDOWPRINT) ./cmd/windowprint

# Builds the distribution, runs it on examples/demo.yaml with windowprint printing the windows' values,
# and feeds it demo traffic; Ctrl-C stops all three.
demo: $(DIST) loadgen windowprint
	./scripts/demo.sh $(DIST) $(LOADGEN) $(WINDOWPRINT)

# Engine and sketch micro-benchmarks, and the side-by-side comparison with span_metrics (bench/), at
# 1000 and at 50000 spans per second of event time (see bench/README.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./processor/... .
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -timeout 60m
	cd bench && BENCH_SPANS_PER_SECOND=50000 $(GO) test -run '^$$' -bench 'Paired|LogsToMetrics|ReadOnly' -benchtime 15000x -benchmem -timeout 60m

# Regenerates internal/metadata, internal/metadatatest, the generated tests and documentation.md from
# metadata.yaml (and connector/metadata.yaml). mdatagen is built in a throwaway module, as `go run
# ...@version` needs a version list that the proxy may not serve; it runs through a symlink named
# windowaggregator, as it names the generated tests' package after the directory, and outside the
# throwaway module, as it takes the outermost go.mod above metadata.yaml for the module root. If the
# generated code comes to import a new module, `go mod tidy` adds it.
MDATAGEN_VERSION ?= v0.159.0
generate:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	mkdir "$$tmp/build" "$$tmp/src"; \
	( cd "$$tmp/build" && $(GO) mod init mdatagen >/dev/null 2>&1 && \
	  $(GO) get go.opentelemetry.io/collector/cmd/mdatagen@$(MDATAGEN_VERSION) >/dev/null 2>&1 && \
	  $(GO) build -o mdatagen go.opentelemetry.io/collector/cmd/mdatagen ) || \
	  { echo "building mdatagen $(MDATAGEN_VERSION) failed"; exit 1; }; \
	ln -s "$(CURDIR)" "$$tmp/src/windowaggregator"; \
	cd "$$tmp/src/windowaggregator" && "$$tmp/build/mdatagen" metadata.yaml; \
	cd "$$tmp/src/windowaggregator/connector" && "$$tmp/build/mdatagen" metadata.yaml
