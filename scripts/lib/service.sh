# shellcheck shell=bash
# Shared by scripts/with-dynamodb.sh and scripts/with-redis.sh: start local servers on free loopback ports (one,
# or several, as the nodes of a Redis Cluster), run a command beside them, and always stop every server again
# (normal exit, failing command, Ctrl-C, kill).
# Sourced, not executed. Plain bash (3.2 on macOS too): no python, no curl, no netcat.

SVC_NAME=${SVC_NAME:-service}
SVC_PID=""   # the server being started (svc_start_with_retries)
SVC_PIDS=""  # every server started and answering, space-separated: svc_cleanup stops them all
SVC_TMP=""   # their temp dir (logs, data dirs)
SVC_LOG=""   # the log of the server being started; empty: $SVC_TMP/server.log
CMD_PID=""   # the command we run beside it
SVC_SIGNAL="" # the last signal we received while the command ran
SVC_GOT_SIGNAL=0

svc_say() { printf 'idemkit: %s\n' "$*" >&2; }

# svc_need_fail prints one line and exits 2: a missing tool is a set-up problem, not a test failure.
svc_need_fail() { svc_say "$*"; exit 2; }

# svc_free_port sets SVC_PORT to a TCP port on which nothing answers on 127.0.0.1 (a variable, not output:
# $RANDOM in a command substitution repeats itself on older bash). Ports come from below Linux's
# ephemeral range (32768+), so outgoing connections do not race us for them. A server that loses the
# remaining race reports "address in use" and svc_start_with_retries picks another port.
svc_free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      SVC_PORT=$p
      return 0
    fi
  done
  svc_say "no free loopback port found"
  return 1
}

# svc_stop_server stops every server we started, by PID: TERM, up to 10 s to shut down, then KILL.
svc_stop_server() {
  local pids="" pid
  for pid in $SVC_PIDS $SVC_PID; do
    case " $pids " in *" $pid "*) ;; *) pids="$pids $pid" ;; esac
  done
  SVC_PID=""
  SVC_PIDS=""
  [ -n "$pids" ] || return 0
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 100); do
    local alive=""
    for pid in $pids; do
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    [ -n "$alive" ] || break
    sleep 0.1
  done
  for pid in $pids; do
    if kill -0 "$pid" 2>/dev/null; then
      svc_say "$SVC_NAME (pid $pid) ignored SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

svc_cleanup() {
  trap - EXIT INT TERM HUP
  if [ -n "$CMD_PID" ]; then # still running: we are exiting on an error
    kill -TERM -- "-$CMD_PID" 2>/dev/null || true
    wait "$CMD_PID" 2>/dev/null || true
  fi
  svc_stop_server
  if [ -n "$SVC_TMP" ]; then rm -rf "$SVC_TMP"; fi
}

svc_on_signal() {
  SVC_SIGNAL=$1
  SVC_GOT_SIGNAL=1
  if [ -n "$CMD_PID" ]; then
    # Pass it on to the command's process group; the command decides how to stop.
    kill -s "$1" -- "-$CMD_PID" 2>/dev/null || true
  else
    exit $((128 + $(kill -l "$1")))
  fi
}

# svc_install_traps must run before the server starts, so that no exit path leaves it running.
svc_install_traps() {
  SVC_TMP=$(mktemp -d "${TMPDIR:-/tmp}/idemkit-${SVC_NAME}.XXXXXX")
  trap svc_cleanup EXIT
  trap 'svc_on_signal INT' INT
  trap 'svc_on_signal TERM' TERM
  trap 'svc_on_signal HUP' HUP
}

# svc_log prints the path of the log of the server being started: SVC_LOG, or $SVC_TMP/server.log.
svc_log() { printf '%s\n' "${SVC_LOG:-$SVC_TMP/server.log}"; }

# svc_log_tail prints the end of the server's log (svc_log), for a start-up failure.
svc_log_tail() {
  svc_say "last lines of the $SVC_NAME log ($(svc_log)):"
  tail -n 30 "$(svc_log)" >&2 || true
}

# svc_start_with_retries START READY: START PORT launches the server in the background (its output going
# to the log svc_log names) and sets SVC_PID; READY PORT succeeds once it answers. Waits up to
# IDEMKIT_START_TIMEOUT seconds (default 60); a server that dies at start-up (a lost port race) is retried on
# another port, twice. Sets SVC_PORT, and adds SVC_PID to SVC_PIDS once the server answers. Call it once per
# server: every server it started is stopped at exit.
svc_start_with_retries() {
  local start=$1 ready=$2 attempt deadline
  for attempt in 1 2 3; do
    svc_free_port || return 1
    : >"$(svc_log)"
    "$start" "$SVC_PORT"
    deadline=$((SECONDS + ${IDEMKIT_START_TIMEOUT:-60}))
    while :; do
      if "$ready" "$SVC_PORT"; then
        SVC_PIDS="$SVC_PIDS $SVC_PID"
        return 0
      fi
      if ! kill -0 "$SVC_PID" 2>/dev/null; then
        wait "$SVC_PID" 2>/dev/null || true
        SVC_PID=""
        if [ "$attempt" -lt 3 ]; then
          svc_say "$SVC_NAME exited during start-up on port $SVC_PORT; trying another port"
          break
        fi
        svc_say "$SVC_NAME exited during start-up (3 attempts)"
        svc_log_tail
        return 1
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        svc_say "$SVC_NAME did not answer on 127.0.0.1:$SVC_PORT within ${IDEMKIT_START_TIMEOUT:-60} s"
        svc_log_tail
        return 1
      fi
      sleep 0.1
    done
  done
  return 1
}

# svc_run_command runs "$@" beside the server and exits with its status (128+n if we got signal n).
#
# From a terminal, the command runs in the foreground of our process group, as it would without this script:
# Ctrl-C reaches it directly (go test stops its test binaries and reports), and we clean up when it returns.
# Otherwise (CI, make without a terminal, a pipe) it runs as a job in a process group of its own, and a signal
# sent to this script alone (a CI timeout, kill -INT/-TERM PID) is passed on to that whole group at once, so
# neither `go` nor the test binary it started outlives the server.
svc_run_command() {
  local rc=0
  if [ -t 0 ]; then
    "$@" || rc=$?
    exit "$rc"
  fi
  set -m
  "$@" &
  CMD_PID=$!
  set +m
  while :; do
    SVC_GOT_SIGNAL=0
    rc=0
    wait "$CMD_PID" || rc=$?
    # wait returns early when a trapped signal arrives; bash keeps the status, so wait again.
    [ "$SVC_GOT_SIGNAL" = 1 ] || break
  done
  CMD_PID=""
  if [ -n "$SVC_SIGNAL" ]; then
    exit $((128 + $(kill -l "$SVC_SIGNAL")))
  fi
  exit "$rc"
}
