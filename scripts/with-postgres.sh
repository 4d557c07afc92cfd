#!/usr/bin/env bash
# Usage: scripts/with-postgres.sh CMD [ARGS...]
#
# Runs CMD with a PostgreSQL server available, and exits with CMD's status.
#
# If POSTGRES_URL is set (a server you run yourself), CMD runs against it and nothing is started. Otherwise a
# throwaway cluster is made with initdb in a temp dir (trust authentication, user postgres, no fsync: test data
# only) and its postgres started on a free port of 127.0.0.1, its unix socket in that temp dir too. CMD sees
#
#   POSTGRES_URL=postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable   IDEMKIT_REQUIRE_POSTGRES=1
#
# IDEMKIT_REQUIRE_POSTGRES=1 tells the integration tests to fail, not skip, when they find no server. The server
# is stopped again, by PID, when CMD ends, fails or is interrupted, and the temp dir removed.
#
# initdb and postgres refuse to run as root. Run as root, this script makes the temp dir over to an unprivileged
# user (IDEMKIT_PG_USER, default: postgres if that user exists, else nobody) and runs them as that user with
# setpriv, which execs (the PID stopped at the end is the server's own). The user must be able to reach the temp
# dir: keep TMPDIR world-searchable (the default /tmp is).
#
# Needs PostgreSQL's server programs initdb, postgres and pg_isready: on PATH, or in Debian's
# /usr/lib/postgresql/<N>/bin (the newest N), or in PG_BINDIR. Debian package postgresql (scripts/ci-deps.sh
# installs it). Exit status 2: they are missing.
# IDEMKIT_START_TIMEOUT (seconds, default 60) bounds the wait for the server to answer.
# shellcheck disable=SC2317 # the start and ready functions are called through svc_start_with_retries
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SVC_NAME=postgres
# shellcheck source=scripts/lib/service.sh
. "$root/scripts/lib/service.sh"

if [ "$#" -eq 0 ]; then
  echo "usage: scripts/with-postgres.sh CMD [ARGS...]" >&2
  exit 2
fi

export IDEMKIT_REQUIRE_POSTGRES=1

if [ -n "${POSTGRES_URL:-}" ]; then
  svc_say "using PostgreSQL at POSTGRES_URL (nothing started)"
  exec "$@"
fi

# --- prerequisites -------------------------------------------------------------------------------------------
bindir=${PG_BINDIR:-}
if [ -z "$bindir" ]; then
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    # Through symbolic links: pg_isready lives beside the real initdb (Debian links some programs elsewhere).
    bindir=$(dirname "$(readlink -f "$(command -v initdb)")")
  else
    for d in /usr/lib/postgresql/*/bin; do
      # The newest: versions sort numerically on the directory name.
      if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then
        v=${d#/usr/lib/postgresql/}
        v=${v%/bin}
        if [ -z "$bindir" ] || [ "${v%%.*}" -gt "${best%%.*}" ]; then
          bindir=$d
          best=$v
        fi
      fi
    done
  fi
fi
for prog in initdb postgres pg_isready; do
  [ -n "$bindir" ] && [ -x "$bindir/$prog" ] ||
    svc_need_fail "PostgreSQL tests need the server programs initdb, postgres and pg_isready (not found on PATH, in /usr/lib/postgresql/*/bin or PG_BINDIR); install Debian package postgresql or set POSTGRES_URL"
done

# as_user runs its arguments as the server's user: ourselves, or (as root) an unprivileged user, with exec.
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  pg_user=${IDEMKIT_PG_USER:-}
  if [ -z "$pg_user" ]; then
    if id postgres >/dev/null 2>&1; then pg_user=postgres; else pg_user=nobody; fi
  fi
  id "$pg_user" >/dev/null 2>&1 || svc_need_fail "IDEMKIT_PG_USER=$pg_user: no such user"
  command -v setpriv >/dev/null 2>&1 ||
    svc_need_fail "running as root, PostgreSQL must run as another user, and setpriv (Debian package util-linux) was not found"
  as_user=(setpriv --reuid="$pg_user" --regid="$(id -g "$pg_user")" --clear-groups --reset-env --)
fi

svc_install_traps
data=$SVC_TMP/data
if [ "${#as_user[@]}" -gt 0 ]; then
  chown "$pg_user" "$SVC_TMP"
fi

SVC_LOG=$SVC_TMP/initdb.log
if ! ${as_user[@]+"${as_user[@]}"} "$bindir/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
  --no-sync >"$(svc_log)" 2>&1; then
  svc_say "initdb failed"
  svc_log_tail
  exit 1
fi

start_postgres() {
  # fsync, synchronous_commit and full_page_writes off: a throwaway test cluster, not durable storage.
  ${as_user[@]+"${as_user[@]}"} "$bindir/postgres" -D "$data" -h 127.0.0.1 -p "$1" -k "$SVC_TMP" \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
    -c listen_addresses=127.0.0.1 >"$(svc_log)" 2>&1 &
  SVC_PID=$!
}

postgres_ready() {
  "$bindir/pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres -d postgres -t 2 2>/dev/null
}

SVC_LOG=$SVC_TMP/server.log
svc_start_with_retries start_postgres postgres_ready || exit 1
export POSTGRES_URL="postgres://postgres@127.0.0.1:$SVC_PORT/postgres?sslmode=disable"
svc_say "PostgreSQL $("$bindir/postgres" --version | sed -n "s/^postgres (PostgreSQL) \([^ ]*\).*/\1/p") at $POSTGRES_URL (pid $SVC_PID${pg_user:+, as $pg_user})"

svc_run_command "$@"
