# claudectl — see README.md. The pinned Claude Code CLI version lives here and nowhere else.
CLAUDE_CODE_VERSION ?= 2.1.329
TOOLS := $(CURDIR)/.tools
CLAUDE_BIN := $(TOOLS)/claude-code-$(CLAUDE_CODE_VERSION)/node_modules/.bin/claude
GO ?= go

export CLAUDECTL_TEST_CLI := $(CLAUDE_BIN)

.PHONY: all build run test vet fmt cli bench clean

all: build

build:
	$(GO) build -o bin/claudectl ./cmd/claudectl

# The main job. Until the daemon exists this runs one prompt through the real CLI.
# PROMPT and ARGS can be overridden: make run PROMPT='list the files' ARGS='--permission-mode acceptEdits'
PROMPT ?= Say hello in one sentence.
run: build cli
	./bin/claudectl run --cli "$(CLAUDE_BIN)" $(ARGS) "$(PROMPT)"

# Installs the pinned CLI into .tools/ (project-local, git-ignored) when it is missing.
cli: $(CLAUDE_BIN)
$(CLAUDE_BIN):
	./scripts/install-cli.sh $(CLAUDE_CODE_VERSION) $(TOOLS)/claude-code-$(CLAUDE_CODE_VERSION)

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: cli fmt vet
	$(GO) test -race -count=1 ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./internal/jsonl/ ./claude/
	$(GO) build -o bin/sdkconsume ./bench/sdkconsume
	../shared/bench/compare.sh '$(CURDIR)/bin/sdkconsume'

clean:
	rm -rf bin
