#!/usr/bin/env bash
# Usage: scripts/with-redis.sh CMD [ARGS...]
#
# Runs CMD with a Redis server available, and exits with CMD's status.
#
# If REDIS_URL is set, CMD runs against it and nothing is started. Otherwise redis-server is started on a free
# port of 127.0.0.1 (no persistence, its files in a temp dir) and stopped again when CMD ends, fails or is
# interrupted. CMD then sees REDIS_URL=redis://127.0.0.1:PORT/0 and IDEMKIT_REQUIRE_REDIS=1, which tells the
# integration tests to fail, not skip, when they find no server.
# Needs redis-server (Debian package redis-server; scripts/ci-deps.sh installs it). Exit status 2: it is missing.
# IDEMKIT_START_TIMEOUT (seconds, default 60) bounds the wait for the server to answer.
# shellcheck disable=SC2317 # the start and ready functions are called through svc_start_with_retries
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SVC_NAME=redis
# shellcheck source=scripts/lib/service.sh
. "$root/scripts/lib/service.sh"

if [ "$#" -eq 0 ]; then
  echo "usage: scripts/with-redis.sh CMD [ARGS...]" >&2
  exit 2
fi

export IDEMKIT_REQUIRE_REDIS=1

if [ -n "${REDIS_URL:-}" ]; then
  svc_say "using Redis at REDIS_URL=$REDIS_URL (nothing started)"
  exec "$@"
fi

command -v redis-server >/dev/null 2>&1 ||
  svc_need_fail "Redis tests need redis-server (not found); install Debian package redis-server or set REDIS_URL"

start_redis() {
  redis-server --bind 127.0.0.1 --port "$1" --save '' --appendonly no --daemonize no \
    --dir "$SVC_TMP" --logfile '' >"$SVC_TMP/server.log" 2>&1 &
  SVC_PID=$!
}

# redis_ready succeeds when PING on PORT answers PONG (plain bash: no redis-cli needed).
redis_ready() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 5 reply <&3 || exit 1
    case $reply in "+PONG"*) exit 0 ;; *) exit 1 ;; esac
  ) 2>/dev/null
}

svc_install_traps
svc_start_with_retries start_redis redis_ready || exit 1

export REDIS_URL="redis://127.0.0.1:$SVC_PORT/0"
svc_say "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') at $REDIS_URL (pid $SVC_PID)"

svc_run_command "$@"
