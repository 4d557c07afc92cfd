# idemkit's front door. `make test` is what CI runs (.ci/run); it needs Go, and for the integration tests
# Java 17+, Node.js/npm (DynamoDB Local) and redis-server: scripts/ci-deps.sh installs those from Debian.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
MAKEFLAGS += --no-builtin-rules

# Pinned: staticcheck 2026.2.2 (v0.8.2) is the first release whose go.mod says go 1.26.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO_TEST_FLAGS ?= -race -count=1
# Starts DynamoDB Local and redis-server on free loopback ports for the command that follows (unless
# AWS_ENDPOINT_URL_DYNAMODB / REDIS_URL are set), and stops them afterwards.
WITH_SERVICES := scripts/with-dynamodb.sh scripts/with-redis.sh

.PHONY: test
test: vet lint test-go
# --- more test targets go here (test-infra: the CDK stack tests in infra/, its own module) and join `test` ---

.PHONY: vet
vet:
	go vet ./...

.PHONY: lint
lint:
	go run $(STATICCHECK) ./...

# Unit and integration tests of the root module, against DynamoDB Local and Redis.
.PHONY: test-go
test-go:
	$(WITH_SERVICES) go test $(GO_TEST_FLAGS) ./...

# An in-memory DynamoDB Local in the foreground until Ctrl-C, for trying things by hand.
.PHONY: ddb-local
ddb-local:
	scripts/with-dynamodb.sh bash -c 'echo "export AWS_ENDPOINT_URL_DYNAMODB=$$AWS_ENDPOINT_URL_DYNAMODB AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=$$AWS_REGION"; echo "(Ctrl-C stops it)"; while :; do sleep 3600; done'
