# openclaw-go. `make demo` runs the main job on embedded defaults; `make test` runs the tests.
GO       ?= go
# The version is the VERSION file (git tags need not travel); the commit and its time are
# stamped when git knows them. The time is the commit's, never the build's (reproducible).
VERSION  ?= $(shell cat VERSION)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(SOURCE_DATE_EPOCH)
BIN      := bin/openclaw
PEERS_DIR ?= $(CURDIR)/.peers
export PEERS_DIR

# staticcheck, built once per version and Go toolchain outside the module (go.mod stays as it is)
# and cached under $(TOOLS_DIR); CI fetches it through the Go module proxy on its first run.
STATICCHECK_VERSION := v0.8.2
TOOLS_DIR   ?= $(HOME)/.cache/openclaw-go/tools
STATICCHECK := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)-$(shell $(GO) env GOVERSION)/staticcheck

.PHONY: build guests rego test test-short check staticcheck demo interop bench peers clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/openclaw

## guests: rebuild the committed Wasm modules from source (Debian rustc + wabt).
guests:
	GO=$(GO) bash guests/build.sh

## rego: rebuild the Rego example and the OPA test modules (the first run builds OPA: ~6.5 min;
## kept out of CI, whose tests check the committed modules' behaviour).
rego:
	bash guests/rego/build.sh

## test: every test, with the race detector. The end-to-end tests spawn the built binary
## and real MCP peers (go-sdk, the Node SDK, npm MCP servers, the conformance suite), which
## `make peers` installs into $(PEERS_DIR) first; a test whose peer is missing skips with a
## message saying so (under CI=true it fails).
test: peers
	$(GO) test -race -count=1 -timeout 30m ./...
	cd guests/sdk/go && GOWORK=off $(GO) test -race -count=1 .

test-short:
	$(GO) test -short ./...

## check: formatting, vet, staticcheck, tidy modules, reproducible guests; fails on any diff.
check: staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./... # a release target: its build and tests must compile too
	$(GO) mod tidy -diff
	cd guests/sdk/go && GOWORK=off $(GO) vet . && GOOS=wasip1 GOARCH=wasm GOWORK=off $(GO) vet .
	cd guests/examples/go && GOOS=wasip1 GOARCH=wasm GOWORK=off $(GO) vet .
	GO=$(GO) bash guests/build.sh
	git diff --exit-code -- policies/builtin guests

## staticcheck: the checks of staticcheck.conf on the host module. Deprecated MCP features that
## the proxy and the runtime pass through on purpose are excluded file by file with
## //lint:file-ignore and the reason.
staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

$(STATICCHECK):
	mkdir -p $(dir $@)
	cd $(dir $@) && GOFLAGS= GOBIN=$(abspath $(dir $@)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## demo: a local Gateway with seeded conversations, `openclaw mcp serve` with the built-in
## rules module blocking one tool, driven by a real MCP client; prints a transcript.
demo: build
	$(GO) run ./examples/demo -bin $(BIN)

## interop: the same client checks against the real OpenClaw Gateway (by hand: root, ~1 GB).
interop: build
	bash bench/interop.sh

## peers: the pinned real MCP peers (Node SDK client, servers, conformance suite, go-sdk
## fixtures) into $(PEERS_DIR); does nothing when they are installed.
peers:
	bash test/peers/install.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./policies/... ./bridge/...

## man: the man pages of every command, generated from the command tree, into bin/man/man1
## (read one with `man -l bin/man/man1/openclaw-mcp-serve.1`).
.PHONY: man
man: build
	rm -rf bin/man/man1
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN) gen-man bin/man/man1

## release: the release files into dist/ (archives, SBOMs, OCI image, SHA256SUMS), offline
## and reproducible (see release/main.go); release-check builds them twice and compares.
.PHONY: release release-check
release:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./release -out dist -commit '$(COMMIT)'

release-check:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) bash release/check.sh

clean:
	rm -rf bin dist
