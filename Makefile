# claudectl — see README.md. The pinned Claude Code CLI version lives here and nowhere else.
CLAUDE_CODE_VERSION ?= 2.1.332
# The newest CLIs refuse --sdk-url to a local server (since 2.1.121); the WebSocket
# transport is tested with this older one, a cli.js run by node.
CLAUDE_CODE_WS_VERSION := 2.1.37
TOOLS := $(CURDIR)/.tools
CLAUDE_BIN := $(TOOLS)/claude-code-$(CLAUDE_CODE_VERSION)/node_modules/.bin/claude
CLAUDE_WS_BIN := $(TOOLS)/claude-code-$(CLAUDE_CODE_WS_VERSION)/node_modules/.bin/claude
# The official TypeScript SDK whose surface docs/parity.md maps; claude/parity_test.go reads its
# sdk.d.ts (npm view @anthropic-ai/claude-agent-sdk versions). Moving it: make parity-diff
# FROM=<this> TO=<new> says what changed and what the table does not map yet.
CLAUDE_AGENT_SDK_VERSION := 0.3.332
AGENT_SDK_DTS := $(TOOLS)/claude-agent-sdk-$(CLAUDE_AGENT_SDK_VERSION)/node_modules/@anthropic-ai/claude-agent-sdk/sdk.d.ts
# grpcurl, a gRPC client that is not ours, drives the daemon's API in apiserver's tests.
GRPCURL_VERSION := v1.9.3
GO ?= go

export CLAUDECTL_TEST_CLI := $(CLAUDE_BIN)
export CLAUDECTL_TEST_CLI_WS := $(CLAUDE_WS_BIN)
export CLAUDECTL_TEST_GRPCURL := $(TOOLS)/bin/grpcurl
export CLAUDECTL_TEST_HYDRA := $(TOOLS)/bin/hydra
export CLAUDECTL_TEST_AGENT_SDK_DTS := $(AGENT_SDK_DTS)

.PHONY: all build install run demo grpcurl hydra test test-busy stress-ng vet fmt cli bench generate clean fixtures parity-diff tmux sandbox web web-deps web-test chromium postgresql systemd release

all: build

# The CLI make installs is built into claudectl (claude.BuiltInPath): claudectl run,
# serve and doctor find it as make run's daemon does, wherever claudectl is run from.
LDFLAGS := -X 'github.com/claudectl/claudectl/claude.builtInCLI=$(CLAUDE_BIN)'
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/claudectl ./cmd/claudectl

# Installs claudectl into $(BINDIR) (default ~/.local/bin), with the CLI make installed
# built in: make install BINDIR=/usr/local/bin
BINDIR ?= $(HOME)/.local/bin
install: build cli
	mkdir -p "$(BINDIR)"
	cp bin/claudectl "$(BINDIR)/claudectl.tmp" && mv "$(BINDIR)/claudectl.tmp" "$(BINDIR)/claudectl"
	@case ":$$PATH:" in *":$(BINDIR):"*) echo "installed $(BINDIR)/claudectl";; \
	  *) echo "installed $(BINDIR)/claudectl; $(BINDIR) is not on your PATH: add it (export PATH=\"$(BINDIR):\$$PATH\") or run $(BINDIR)/claudectl";; esac

# The main job: the daemon on 127.0.0.1:7777 with its embedded SQLite store
# ($XDG_DATA_HOME/claudectl), running the pinned CLI. ARGS adds serve flags:
# make run ARGS='--listen 127.0.0.1:8000'
run: build cli
	./bin/claudectl serve --cli "$(CLAUDE_BIN)" $(ARGS)

# The daemon with a scripted model instead of Claude: no API key, nothing leaves
# the machine; its banner lists what to try. make demo ARGS='--listen 127.0.0.1:8000'
demo: build cli
	./bin/claudectl serve --demo --cli "$(CLAUDE_BIN)" $(ARGS)

# Installs the pinned CLIs into .tools/ (project-local, git-ignored) when they are missing.
cli: $(CLAUDE_BIN) $(CLAUDE_WS_BIN)
$(CLAUDE_BIN):
	./scripts/install-cli.sh $(CLAUDE_CODE_VERSION) $(TOOLS)/claude-code-$(CLAUDE_CODE_VERSION)
$(CLAUDE_WS_BIN):
	./scripts/install-cli.sh $(CLAUDE_CODE_WS_VERSION) $(TOOLS)/claude-code-$(CLAUDE_CODE_WS_VERSION)
$(AGENT_SDK_DTS):
	./scripts/install-agent-sdk.sh $(CLAUDE_AGENT_SDK_VERSION) $(TOOLS)/claude-agent-sdk-$(CLAUDE_AGENT_SDK_VERSION)
# grpcurl, for trying the API by hand: .tools/bin/grpcurl
grpcurl: $(TOOLS)/bin/grpcurl
$(TOOLS)/bin/grpcurl:
	GO=$(GO) ./scripts/install-grpcurl.sh $(GRPCURL_VERSION) $(TOOLS)/bin

# Ory Hydra, the OpenID Connect provider the page's sign-in test runs on loopback
# (web/oidc_e2e_test.go), built from the Go module proxy as tools/hydra/go.mod pins it.
hydra: $(TOOLS)/bin/hydra
$(TOOLS)/bin/hydra: tools/hydra/go.mod tools/hydra/go.sum
	@mkdir -p $(TOOLS)/bin
	cd tools/hydra && CGO_ENABLED=1 $(GO) build -tags sqlite,sqlite_omit_load_extension,json1 -o $(TOOLS)/bin/hydra github.com/ory/hydra/v2

# Records the scripted scenarios from a real CLI into claude/testdata/real/<version>/ for
# the contract tests (claude/contract_test.go), installing that CLI into .tools/ if needed:
# make fixtures CLI=2.1.332. Add the version to RecordedVersions in claude/version.go.
CLI ?= $(CLAUDE_CODE_VERSION)
fixtures:
	@[ -x "$(TOOLS)/claude-code-$(CLI)/node_modules/.bin/claude" ] || ./scripts/install-cli.sh $(CLI) $(TOOLS)/claude-code-$(CLI)
	CLAUDECTL_TEST_CLI=$(TOOLS)/claude-code-$(CLI)/node_modules/.bin/claude \
	CLAUDETEST_RECORD=$(CURDIR)/claude/testdata/real/$(CLI) \
		$(GO) test -count=1 -run '^TestRecordTranscripts$$' ./claudetest/

# What changed in the official TypeScript SDK between two versions that the Go SDK maps (option
# fields, query methods, control request subtypes, message types, hook events, capabilities,
# startup failure reasons), and which names of TO docs/parity.md does not map yet (then the exit
# status is 1): make parity-diff FROM=0.3.330 TO=0.3.332. Installs both into .tools/ if needed;
# TO defaults to the pinned version (internal/tools/paritydiff).
TO ?= $(CLAUDE_AGENT_SDK_VERSION)
SDK_DTS = $(TOOLS)/claude-agent-sdk-$(1)/node_modules/@anthropic-ai/claude-agent-sdk/sdk.d.ts
parity-diff:
	@[ -n "$(FROM)" ] || { echo "usage: make parity-diff FROM=0.3.330 TO=0.3.332 (TO defaults to the pinned $(CLAUDE_AGENT_SDK_VERSION))"; exit 2; }
	@for v in $(FROM) $(TO); do [ -f "$(call SDK_DTS,$$v)" ] || ./scripts/install-agent-sdk.sh $$v $(TOOLS)/claude-agent-sdk-$$v; done
	@$(GO) run ./internal/tools/paritydiff -table docs/parity.md "$(call SDK_DTS,$(FROM))" "$(call SDK_DTS,$(TO))"

# The terminal tests (internal/cli) run claudectl in a tmux pane: installed with apt-get when
# missing and root on Debian; elsewhere they are skipped (and fail under CI=true).
tmux:
	@command -v tmux >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq tmux || { apt-get update -qq && apt-get install -y -qq tmux; }; }; } || \
		echo "tmux is missing: the terminal tests will be skipped (install tmux)"

# Claude Code's sandbox on Linux (sessions.sandbox; TestSandboxEnforced) needs bubblewrap and
# socat: installed with apt-get when missing and root on Debian; elsewhere the test is skipped
# (and fails under CI=true).
sandbox:
	@command -v bwrap >/dev/null 2>&1 && command -v socat >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq bubblewrap socat || { apt-get update -qq && apt-get install -y -qq bubblewrap socat; }; }; } || \
		echo "bubblewrap or socat is missing: the sandbox test will be skipped (install bubblewrap and socat)"

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The service units' test (contrib/systemd) runs systemd-analyze verify: systemd is installed
# with apt-get when missing and root on Debian; elsewhere that test is skipped (and fails under
# CI=true).
systemd:
	@command -v systemd-analyze >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq systemd || { apt-get update -qq && apt-get install -y -qq systemd; }; }; } || \
		echo "systemd-analyze is missing: the service units' test will be skipped (install systemd)"

# What make test needs: the pinned CLIs, grpcurl, Ory Hydra, the TS SDK's types, tmux, the sandbox's
# tools, Chromium, PostgreSQL and systemd-analyze (installed when missing), the page's tests, gofmt and vet.
TEST_DEPS := cli $(TOOLS)/bin/grpcurl $(TOOLS)/bin/hydra $(AGENT_SDK_DTS) tmux sandbox chromium postgresql systemd web-test fmt vet

# The Go suites (scripts/test-suites.sh): every test with -race, one line per package as it ends
# (internal/tools/testsum); the 10,000-session release test, too slow under the race detector;
# the daemon's tests once more with every test daemon's store on PostgreSQL (a throwaway server
# on loopback, store/postgres/pgtest). Every suite runs even when one before it failed; a line
# per suite (passed or FAILED, its time) and the total time at the end, then make fails if any did.
test: $(TEST_DEPS)
	@GO="$(GO)" ./scripts/test-suites.sh

# The same suites on a busy machine, for hunting tests that wait a guessed time instead of for a
# condition: $(STRESS) runs alongside them and is stopped at the end. Debian's stress-ng is
# installed when missing (apt-get, as root); plain make test does not need it.
STRESS ?= stress-ng --cpu 2
test-busy: $(TEST_DEPS) $(if $(filter stress-ng,$(firstword $(STRESS))),stress-ng)
	@GO="$(GO)" STRESS="$(STRESS)" ./scripts/test-suites.sh

stress-ng:
	@command -v stress-ng >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq stress-ng || { apt-get update -qq && apt-get install -y -qq stress-ng; }; }; } || \
		{ echo "stress-ng is missing: install it (apt-get install stress-ng) or give make test-busy another STRESS command"; exit 1; }

# The web page (web/README.md). web-deps installs its locked packages into web/node_modules;
# web rebuilds web/dist, which is committed and embedded in claudectl (go build alone gives the
# page); web-test runs its unit tests (Vitest) and checks that the committed build is what the
# sources build to. The end-to-end tests in Chromium are web/e2e_test.go, run by go test.
web-deps: web/node_modules/.package-lock.json
# npm install with the committed lock, not npm ci: npm ci refuses a lock that lacks a platform
# package the registry lists, and which of rollup's and esbuild's builds for other systems the
# registry lists changes from day to day. What npm installs must be what the lock says:
# scripts/lockcheck.mjs compares the two (other platforms' optional packages may be added),
# and the committed lock is put back either way.
web/node_modules/.package-lock.json: web/package-lock.json web/package.json
	@cp web/package-lock.json web/.package-lock.before
	cd web && npm install --no-audit --no-fund
	@cd web && node scripts/lockcheck.mjs .package-lock.before package-lock.json; code=$$?; \
		mv .package-lock.before package-lock.json; \
		[ $$code = 0 ] || { echo "update web/package.json and web/package-lock.json together"; rm -f node_modules/.package-lock.json; exit 1; }; \
		touch node_modules/.package-lock.json
web: web-deps
	cd web && npx vite build
web-test: web-deps
	cd web && npx vitest run
	@d=$$(mktemp -d) && (cd web && npx vite build --logLevel warn --outDir $$d --emptyOutDir) && \
		diff -r $$d web/dist >/dev/null && rm -rf $$d && echo "web/dist matches the sources" || \
		{ rm -rf $$d; echo "web/dist is not what the sources build to: run make web and commit web/dist"; exit 1; }

# The page's end-to-end tests drive Debian's Chromium (playwright-core, no downloaded
# browser): installed with apt-get when missing and root on Debian; elsewhere they are
# skipped (and fail under CI=true).
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; }; } || \
		echo "chromium is missing: the web page's browser tests will be skipped (install chromium)"

# The PostgreSQL store's tests start a throwaway server from Debian's postgresql package
# (initdb and postgres, run as the postgres user when root): installed with apt-get when missing
# and root on Debian; elsewhere those tests are skipped (and fail under CI=true).
postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v pg_config >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq postgresql || { apt-get update -qq && apt-get install -y -qq postgresql; }; }; } || \
		echo "postgresql is missing: the PostgreSQL store's tests will be skipped (install postgresql)"

# The decoder and daemon benchmarks, then the side-by-side throughput comparison with the
# official TypeScript SDK (bench/compare/README.md): make bench SCALE=1 for a smaller stream.
SCALE ?= 5
bench: build $(AGENT_SDK_DTS)
	$(GO) test -run '^$$' -bench . -benchmem ./internal/jsonl/ ./claude/
	$(GO) test -run '^$$' -bench Daemon -benchtime 1x -count 3 ./daemon/
	$(GO) build -o bin/sdkconsume ./bench/sdkconsume
	SCALE=$(SCALE) AGENT_SDK_DIR=$(TOOLS)/claude-agent-sdk-$(CLAUDE_AGENT_SDK_VERSION) \
		./bench/compare/compare.sh '$(CURDIR)/bin/sdkconsume'

# Regenerates api/gen from api/*.proto (the generated code is committed).
BUF_VERSION ?= v1.57.0
generate: web-deps
	GOBIN=$(TOOLS)/bin $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	GOBIN=$(TOOLS)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go
	GOBIN=$(TOOLS)/bin $(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go
	PATH=$(TOOLS)/bin:$$PATH buf lint
	rm -rf api/gen web/src/gen && PATH=$(TOOLS)/bin:$$PATH buf generate

# make release VERSION=v0.4.0: static binaries for linux and darwin on amd64 and arm64 in
# dist/VERSION/ (CGO off: the SQLite driver is pure Go, so they need no libc), the version
# stamped (claudectl version, HealthDetails, the metrics' claudectl_build_info), with
# SHA256SUMS beside them. They find the Claude Code CLI as go install's does (CLAUDE_BIN,
# ~/.claude/local, /usr/local/bin, PATH): none is built in.
RELEASE_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
release:
	@case "$(VERSION)" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "usage: make release VERSION=v0.x.y (got \"$(VERSION)\")"; exit 2;; esac
	rm -rf dist/$(VERSION) && mkdir -p dist/$(VERSION)
	@for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; out=dist/$(VERSION)/claudectl-$(VERSION)-$$os-$$arch; \
		echo "building $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath \
			-ldflags "-s -w -X 'github.com/claudectl/claudectl/apiserver.stampedVersion=$(VERSION)'" \
			-o $$out ./cmd/claudectl || exit 1; done
	cd dist/$(VERSION) && { command -v sha256sum >/dev/null 2>&1 && sha256sum claudectl-* || shasum -a 256 claudectl-*; } > SHA256SUMS
	@cat dist/$(VERSION)/SHA256SUMS

clean:
	rm -rf bin dist
