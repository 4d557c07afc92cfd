#!/usr/bin/env bash
# Usage: scripts/need-compose.sh [TARGET]
#
# Checks that this machine can run localstack/docker-compose.yml: a docker command, with the Compose v2 plugin
# (`docker compose`, not the old `docker-compose` v1 and not a docker without the plugin, which would fail later
# with "unknown shorthand flag: 'f'"), and a Docker engine that answers. The Makefile runs it before the
# LocalStack targets (make local-up, local-down, deploy-local). Prints nothing and exits 0 when all is there;
# otherwise says in one line what is missing and exits 2, as scripts/with-*.sh do for a missing prerequisite.
set -euo pipefail

target=${1:-local-up}
fail() {
  echo "idemkit: make $target needs Docker with Compose v2: $*" >&2
  exit 2
}

command -v docker >/dev/null 2>&1 ||
  fail "docker not found (install Docker Engine with the docker-compose-plugin package, or Docker Desktop)"
if ! docker compose version >/dev/null 2>&1; then
  if command -v docker-compose >/dev/null 2>&1; then
    fail "\`docker compose\` does not work, and docker-compose (v1) is not enough: install the Compose v2 plugin (docker-compose-plugin)"
  fi
  fail "\`docker compose\` does not work: install the Compose v2 plugin (docker-compose-plugin)"
fi
docker info >/dev/null 2>&1 ||
  fail "the Docker engine does not answer (\`docker info\` failed): start it, or check that you may use its socket"
