#!/usr/bin/env bash
# Usage: scripts/with-pgbouncer.sh CMD [ARGS...]
#
# Runs CMD with a PgBouncer in transaction pooling mode in front of the PostgreSQL server at POSTGRES_URL, and exits
# with CMD's status. Run it under scripts/with-postgres.sh (the Makefile's WITH_SERVICES does), which sets
# POSTGRES_URL; CMD sees it unchanged, and beside it
#
#   POSTGRES_POOLER_URL=postgres://USER[:PASSWORD]@127.0.0.1:PORT/DB?sslmode=disable   IDEMKIT_REQUIRE_PGBOUNCER=1
#
# the same user and database, through the pooler. IDEMKIT_REQUIRE_PGBOUNCER=1 tells the integration tests to
# fail, not skip, when they find no pooler. If POSTGRES_POOLER_URL is set already (a pooler you run yourself), CMD
# runs against it and nothing is started.
#
# The pooler is the one pgstore's users run: pool_mode = transaction, every other setting PgBouncer's default but
# for the ones a test harness needs (a free loopback port, max_client_conn 1000 for many test pools at once, its
# files in a temp dir, no unix socket). A server connection serves one transaction (or one statement outside a
# transaction) at a time and then whichever client comes next, so named prepared statements do not follow a client
# connection: that is what the tests behind it check. Any database name is passed through to the server ([databases]
# `*`), under the URL's user; the server is reached as POSTGRES_URL says (host, port, sslmode and sslrootcert). The
# URL's password (or PGPASSWORD) is kept in the pooler's auth_file in the temp dir: clients then log in to the
# pooler with it (SCRAM), and without a password there, trust (the server trusts it too).
#
# PgBouncer refuses to run as root. Run as root, this script makes the temp dir over to an unprivileged user
# (IDEMKIT_PG_USER, default: postgres if that user exists, else nobody) and runs pgbouncer as that user with
# setpriv, which execs (the PID stopped at the end is pgbouncer's own). The pooler is stopped again, by PID, when
# CMD ends, fails or is interrupted, and the temp dir removed.
#
# Needs pgbouncer: PGBOUNCER, else on PATH, else /usr/sbin/pgbouncer (Debian package pgbouncer; scripts/ci-deps.sh
# installs it). Exit status 2: it is missing, or POSTGRES_URL is not set or not a postgres:// URL this script
# can read (a libpq key=value string, several hosts, a unix socket): set POSTGRES_POOLER_URL then.
# IDEMKIT_START_TIMEOUT (seconds, default 60) bounds the wait for the pooler to listen.
# shellcheck disable=SC2317 # the start and ready functions are called through svc_start_with_retries
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SVC_NAME=pgbouncer
# shellcheck source=scripts/lib/service.sh
. "$root/scripts/lib/service.sh"

if [ "$#" -eq 0 ]; then
  echo "usage: scripts/with-pgbouncer.sh CMD [ARGS...]" >&2
  exit 2
fi

export IDEMKIT_REQUIRE_PGBOUNCER=1

if [ -n "${POSTGRES_POOLER_URL:-}" ]; then
  svc_say "using the pooler at POSTGRES_POOLER_URL (nothing started)"
  exec "$@"
fi

# --- prerequisites -------------------------------------------------------------------------------------------
pgbouncer=${PGBOUNCER:-}
if [ -z "$pgbouncer" ]; then
  if command -v pgbouncer >/dev/null 2>&1; then
    pgbouncer=$(command -v pgbouncer)
  elif [ -x /usr/sbin/pgbouncer ]; then # Debian's place; not on a normal user's PATH
    pgbouncer=/usr/sbin/pgbouncer
  fi
fi
[ -n "$pgbouncer" ] && [ -x "$pgbouncer" ] ||
  svc_need_fail "the connection pooler tests need pgbouncer (not found on PATH, in /usr/sbin or PGBOUNCER); install Debian package pgbouncer or set POSTGRES_POOLER_URL"
[ -n "${POSTGRES_URL:-}" ] ||
  svc_need_fail "scripts/with-pgbouncer.sh needs POSTGRES_URL: run it under scripts/with-postgres.sh, or set POSTGRES_POOLER_URL"

# --- POSTGRES_URL, read as libpq reads a URL: postgres[ql]://[user[:password]@]host[:port][/db][?k=v&...] --------
url_fail() { svc_need_fail "POSTGRES_URL: $1; scripts/with-pgbouncer.sh reads postgres://user:password@host:port/db?... URLs (or set POSTGRES_POOLER_URL)"; }
# pct_decode prints its argument with %XX escapes decoded (backslashes kept as they are).
pct_decode() {
  local s=${1//\\/\\\\}
  printf '%b' "${s//%/\\x}"
}
# pct_encode prints its argument with every byte but A-Z a-z 0-9 . _ ~ - as %XX, as a URL's userinfo can hold it.
pct_encode() {
  local LC_ALL=C s=$1 c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in [A-Za-z0-9._~-]) printf '%s' "$c" ;; *) printf '%%%02X' "'$c" ;; esac
  done
}
rest=$POSTGRES_URL
case $rest in
  postgres://* | postgresql://*) rest=${rest#*://} ;;
  *) url_fail "not a postgres:// URL" ;;
esac
query=""
case $rest in *\?*) query=${rest#*\?} rest=${rest%%\?*} ;; esac
path=""
case $rest in */*) path=${rest#*/} rest=${rest%%/*} ;; esac
userinfo=""
case $rest in *@*) userinfo=${rest%@*} rest=${rest##*@} ;; esac
hostport=$rest
case $hostport in *,*) url_fail "several hosts" ;; esac
if [[ $hostport == \[*\]* ]]; then # [IPv6]:port
  host=${hostport#\[}
  host=${host%%\]*}
  port=${hostport#*\]}
  port=${port#:}
else
  host=${hostport%%:*}
  port=""
  case $hostport in *:*) port=${hostport#*:} ;; esac
fi
user=$(pct_decode "${userinfo%%:*}")
password=""
case $userinfo in *:*) password=$(pct_decode "${userinfo#*:}") ;; esac

sslmode="" sslrootcert="" kept=()
if [ -n "$query" ]; then
  IFS='&' read -r -a params <<<"$query"
  for kv in "${params[@]}"; do
    k=${kv%%=*}
    v=$(pct_decode "${kv#*=}")
    case $k in
      host | hostaddr) host=$v ;;
      port) port=$v ;;
      user) user=$v ;;
      password) password=$v ;;
      dbname) path=${kv#*=} ;;
      sslmode) sslmode=$v ;;
      sslrootcert) sslrootcert=$v ;;
      sslcert | sslkey | sslpassword) url_fail "client certificates ($k) are not passed on to the pooler" ;;
      *) kept+=("$kv") ;; # connect_timeout, application_name, ...: for the client, kept in the pooler's URL
    esac
  done
fi
host=${host:-${PGHOST:-}}
port=${port:-${PGPORT:-5432}}
[ -n "$host" ] || url_fail "no host"
case $host in /*) url_fail "a unix socket host" ;; *,*) url_fail "several hosts" ;; esac
[[ $host =~ ^[A-Za-z0-9._:-]+$ ]] || url_fail "host \"$host\" is not a host name or an IP address"
[[ $port =~ ^[0-9]+$ ]] || url_fail "port \"$port\" is not a number"
case ${sslmode:-prefer} in disable | allow | prefer | require | verify-ca | verify-full) ;; *) url_fail "unknown sslmode \"$sslmode\"" ;; esac
[[ $sslrootcert != *$'\n'* ]] || url_fail "a line break in sslrootcert"
user=${user:-${PGUSER:-$(id -un)}}
password=${password:-${PGPASSWORD:-}}
case $user$password in *$'\n'* | *$'\r'*) url_fail "a line break in the user or the password" ;; esac

# as_user runs its arguments as pgbouncer's user: ourselves, or (as root) an unprivileged user, with exec.
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  pg_user=${IDEMKIT_PG_USER:-}
  if [ -z "$pg_user" ]; then
    if id postgres >/dev/null 2>&1; then pg_user=postgres; else pg_user=nobody; fi
  fi
  id "$pg_user" >/dev/null 2>&1 || svc_need_fail "IDEMKIT_PG_USER=$pg_user: no such user"
  command -v setpriv >/dev/null 2>&1 ||
    svc_need_fail "running as root, pgbouncer must run as another user, and setpriv (Debian package util-linux) was not found"
  as_user=(setpriv --reuid="$pg_user" --regid="$(id -g "$pg_user")" --clear-groups --reset-env --)
fi

svc_install_traps
if [ "${#as_user[@]}" -gt 0 ]; then
  chown "$pg_user" "$SVC_TMP"
fi
chmod 700 "$SVC_TMP" # the auth_file may hold the server's password

# The auth_file: "user" "password", a double quote doubled (PgBouncer's format). With a password, clients log in
# with SCRAM and the pooler logs in to the server with the same password; without one, trust.
auth_type=trust
[ -z "$password" ] || auth_type=scram-sha-256
printf '"%s" "%s"\n' "${user//\"/\"\"}" "${password//\"/\"\"}" >"$SVC_TMP/userlist.txt"

write_config() { # write_config PORT
  {
    echo "[databases]"
    echo "* = host=$host port=$port"
    echo
    echo "[pgbouncer]"
    echo "pool_mode = transaction"
    echo "listen_addr = 127.0.0.1"
    echo "listen_port = $1"
    echo "unix_socket_dir ="
    echo "auth_type = $auth_type"
    echo "auth_file = $SVC_TMP/userlist.txt"
    echo "max_client_conn = 1000"
    echo "server_tls_sslmode = ${sslmode:-prefer}"
    if [ -n "$sslrootcert" ]; then echo "server_tls_ca_file = $sslrootcert"; fi
    echo "logfile ="
    echo "pidfile ="
  } >"$SVC_TMP/pgbouncer.ini"
  if [ "${#as_user[@]}" -gt 0 ]; then
    chown "$pg_user" "$SVC_TMP/pgbouncer.ini" "$SVC_TMP/userlist.txt"
  fi
}

start_pgbouncer() {
  write_config "$1"
  ${as_user[@]+"${as_user[@]}"} "$pgbouncer" "$SVC_TMP/pgbouncer.ini" >"$(svc_log)" 2>&1 &
  SVC_PID=$!
}

# pgbouncer_ready: it listens on the port (it binds only once its configuration has loaded).
pgbouncer_ready() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

SVC_LOG=$SVC_TMP/pgbouncer.log
svc_start_with_retries start_pgbouncer pgbouncer_ready || exit 1

# The pooler's URL: the same user (and password) and database, the pooler's address, and plain TCP on loopback.
pooler_query=sslmode=disable
for kv in ${kept[@]+"${kept[@]}"}; do pooler_query+="&$kv"; done
auth=$(pct_encode "$user")
[ -z "$password" ] || auth+=":$(pct_encode "$password")"
export POSTGRES_POOLER_URL="postgres://$auth@127.0.0.1:$SVC_PORT/$path?$pooler_query"
svc_say "$("$pgbouncer" --version | head -n 1), pool_mode transaction, at postgres://$(pct_encode "$user")@127.0.0.1:$SVC_PORT/$path in front of $host:$port (pid $SVC_PID${pg_user:+, as $pg_user})"

svc_run_command "$@"
