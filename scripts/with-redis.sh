#!/usr/bin/env bash
# Usage: scripts/with-redis.sh CMD [ARGS...]
#
# Runs CMD with a Redis server and a Redis Cluster available, and exits with CMD's status.
#
# One server: if REDIS_URL is set, CMD runs against it and nothing is started. Otherwise redis-server is started
# on a free port of 127.0.0.1 (no persistence, its files in a temp dir). CMD sees REDIS_URL=redis://127.0.0.1:PORT/0.
#
# A cluster: if REDIS_CLUSTER_ADDRS is set (host:port,host:port,...: nodes of a running Redis Cluster), CMD runs
# against it and nothing is started. Otherwise three redis-server --cluster-enabled yes are started on free ports
# of 127.0.0.1 (each with its cluster bus on another free port), made into a cluster of 3 primaries and no
# replicas (redis-cli --cluster create), and waited for until every node says cluster_state:ok. CMD sees
# REDIS_CLUSTER_ADDRS=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3.
#
# Every server started is stopped again, by PID, when CMD ends, fails or is interrupted. CMD also sees
# IDEMKIT_REQUIRE_REDIS=1, which tells the integration tests to fail, not skip, when they find no server or no
# cluster.
# Needs redis-server and redis-cli (Debian packages redis-server and redis-tools; scripts/ci-deps.sh installs
# them). Exit status 2: one is missing.
# IDEMKIT_START_TIMEOUT (seconds, default 60) bounds each wait: for a server to answer, for the cluster to form.
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
fi
if [ -n "${REDIS_CLUSTER_ADDRS:-}" ]; then
  svc_say "using the Redis Cluster at REDIS_CLUSTER_ADDRS=$REDIS_CLUSTER_ADDRS (nothing started)"
fi
if [ -n "${REDIS_URL:-}" ] && [ -n "${REDIS_CLUSTER_ADDRS:-}" ]; then
  exec "$@"
fi

command -v redis-server >/dev/null 2>&1 ||
  svc_need_fail "Redis tests need redis-server (not found); install Debian package redis-server or set REDIS_URL and REDIS_CLUSTER_ADDRS"
if [ -z "${REDIS_CLUSTER_ADDRS:-}" ]; then
  command -v redis-cli >/dev/null 2>&1 ||
    svc_need_fail "the Redis Cluster tests need redis-cli (not found); install Debian package redis-tools or set REDIS_CLUSTER_ADDRS"
fi

start_redis() {
  redis-server --bind 127.0.0.1 --port "$1" --save '' --appendonly no --daemonize no \
    --dir "$SVC_TMP" --logfile '' >"$(svc_log)" 2>&1 &
  SVC_PID=$!
}

# start_node PORT starts one cluster node: its bus on another free port (the default, PORT+10000, may be taken
# or in the ephemeral range), its nodes.conf in the temp dir.
start_node() {
  local port=$1 bus
  while :; do
    svc_free_port
    bus=$SVC_PORT
    [ "$bus" != "$port" ] && break
  done
  SVC_PORT=$port
  redis-server --bind 127.0.0.1 --port "$port" --cluster-enabled yes --cluster-port "$bus" \
    --cluster-config-file "$SVC_TMP/nodes-$port.conf" --cluster-node-timeout 5000 \
    --save '' --appendonly no --daemonize no --dir "$SVC_TMP" --logfile '' >"$(svc_log)" 2>&1 &
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
version=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')

if [ -z "${REDIS_URL:-}" ]; then
  SVC_LOG=$SVC_TMP/server.log
  svc_start_with_retries start_redis redis_ready || exit 1
  export REDIS_URL="redis://127.0.0.1:$SVC_PORT/0"
  svc_say "redis-server $version at $REDIS_URL (pid $SVC_PID)"
fi

if [ -z "${REDIS_CLUSTER_ADDRS:-}" ]; then
  started=$SECONDS
  addrs=()
  pids=()
  for i in 1 2 3; do
    SVC_LOG=$SVC_TMP/node-$i.log
    svc_start_with_retries start_node redis_ready || exit 1
    addrs+=("127.0.0.1:$SVC_PORT")
    pids+=("$SVC_PID")
  done
  SVC_LOG=$SVC_TMP/cluster-create.log
  if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$(svc_log)" 2>&1; then
    svc_say "redis-cli --cluster create ${addrs[*]} failed"
    svc_log_tail
    exit 1
  fi
  deadline=$((SECONDS + ${IDEMKIT_START_TIMEOUT:-60}))
  for addr in "${addrs[@]}"; do
    until redis-cli -h 127.0.0.1 -p "${addr#*:}" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; do
      if [ "$SECONDS" -ge "$deadline" ]; then
        svc_say "the Redis Cluster did not reach cluster_state:ok on $addr within ${IDEMKIT_START_TIMEOUT:-60} s"
        redis-cli -h 127.0.0.1 -p "${addr#*:}" cluster info >&2 2>&1 || true
        exit 1
      fi
      sleep 0.1
    done
  done
  REDIS_CLUSTER_ADDRS=$(
    IFS=,
    echo "${addrs[*]}"
  )
  export REDIS_CLUSTER_ADDRS
  svc_say "Redis Cluster (redis-server $version, 3 primaries) at REDIS_CLUSTER_ADDRS=$REDIS_CLUSTER_ADDRS (pids ${pids[*]}, ready in $((SECONDS - started)) s)"
fi

svc_run_command "$@"
