#!/usr/bin/env bash
# The suite's conformance legs (docs/development.md, "Test tiers"): the full pass runs on
# PostgreSQL (`npm test` with DATABASE_URL at a server, .ci/run with coverage); these run a named
# set of files, or with `full` every file, on the other two ways a deployment reaches its data:
#
#   bash scripts/test-leg.sh pglite [full]   embedded PGlite in memory (npm run test:pglite)
#   bash scripts/test-leg.sh pooler [full]   a PgBouncer in transaction mode in front of the
#                                            server (npm run test:pooler)
#
# Extra arguments go to tap (e.g. --reporter=tap). The pooler leg starts its own PgBouncer
# (Debian's pgbouncer) in front of POOLER_SERVER (default 127.0.0.1:5432, user postgres, trust
# auth), with DATABASE_URL at the pooler for every ordinary statement and DATABASE_DIRECT_URL at
# the server for migrations, LISTEN and the test files' own databases; it makes one database for
# the run and drops it, and the run's migrated template, at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
leg=${1:?usage: test-leg.sh pglite|pooler [full] [tap arguments]}
shift
full=false
if [ "${1:-}" = full ]; then full=true; shift; fi

# Why each file is in a leg's set: what differs on that way to the data.
# Not in the PGlite set: search-plans.test.ts (the search bound on PGlite's planner, PostgreSQL
# 17's), whose 936 EXPLAIN ANALYZE take minutes there; `npm run test:pglite` runs it.
pglite_set=(
  test/readme.test.ts                   # the README's session, as `npm start` runs it (embedded)
  test/listings/search.test.ts          # one write and search flow, every filter and order
  test/listings/batch.test.ts           # many rows written in one statement
  test/db/unique-lookups.test.ts        # single-row lookups on that planner, stale statistics
  test/webhooks/long-poll.test.ts       # LISTEN/NOTIFY in process: long polls answered on commit
  test/apps/key-cache.test.ts           # a revocation heard through NOTIFY by a second process
  test/db/partitions.test.ts            # the request log's partitions (DDL) on the embedded database
  test/webhooks/delivery.test.ts        # the outbox and the worker's claims on one connection
)
pooler_set=(
  test/readme.test.ts                   # the README's session through the pooler
  test/db/prepared-statements.test.ts   # DATABASE_PREPARED_STATEMENTS on and off behind the pooler
  test/db/pool-wait.test.ts             # the pool's bounded wait, connections held for real
  test/listings/search.test.ts          # one write and search flow
  test/listings/batch.test.ts           # many rows written in one statement
  test/listings/concurrency.test.ts     # concurrent transactions, each on one server connection
  test/webhooks/long-poll.test.ts       # LISTEN on the direct URL, long polls answered on commit
  test/apps/key-cache.test.ts           # a revocation heard through NOTIFY on the direct URL
  test/request-logs/background-writes.test.ts  # set_config(..., true) per transaction
  test/db/partitions.test.ts            # DDL under a lease, not a session's advisory lock
  test/webhooks/delivery.test.ts        # the worker's claims (for update skip locked)
)

case "$leg" in
  pglite)
    files=("${pglite_set[@]}")
    $full && files=()
    # The private-server tests (test/hardening) use their own servers whatever DATABASE_URL
    # says: the full pass runs them.
    exec env DATABASE_URL=memory:// DATABASE_DIRECT_URL= PRIVATE_SERVER_TESTS=skip \
      npx tap "$@" "${files[@]}"
    ;;
  pooler) ;;
  *)
    echo "test-leg.sh: unknown leg $leg (pglite or pooler)" >&2
    exit 2
    ;;
esac

files=("${pooler_set[@]}")
$full && files=()
server=${POOLER_SERVER:-127.0.0.1:5432}
host=${server%:*}
port=${server##*:}
PATH="$PATH:/usr/sbin"
if ! command -v pgbouncer >/dev/null 2>&1; then
  echo "pgbouncer is missing: install it (apt-get install pgbouncer); the pooler leg needs it" >&2
  exit 1
fi
dir=$(mktemp -d)
pooler_port=6432
while (echo > "/dev/tcp/127.0.0.1/$pooler_port") 2>/dev/null; do pooler_port=$((pooler_port + 1)); done
printf '"postgres" ""\n' > "$dir/userlist.txt"
cat > "$dir/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pooler_port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 1000
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
db="pooled_$(date +%s)_$$"
psql_server() { psql -h "$host" -p "$port" -U postgres -q "$@" postgres; }
stop() {
  if [ -s "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
  if [ -n "${POOLER_LOG:-}" ]; then cp "$dir/pgbouncer.log" "$POOLER_LOG" 2>/dev/null || true; fi
  psql_server -c "drop database if exists $db with (force)" || true
  for template in $(psql_server -At -c "select datname from pg_database where datname like 't\\_template\\_${db}\\_%'"); do
    psql_server -c "drop database if exists \"$template\" with (force)" || true
  done
  rm -rf "$dir"
}
trap stop EXIT
# PgBouncer refuses to run as root: as root it drops to the postgres user.
as_user=()
if [ "$(id -u)" -eq 0 ]; then chown -R postgres "$dir"; as_user=(-u postgres); fi
pgbouncer -d "${as_user[@]}" "$dir/pgbouncer.ini"
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p "$pooler_port" && break; sleep 0.2; done
psql_server -c "create database $db"
env PRIVATE_SERVER_TESTS=skip DATABASE_URL="postgres://postgres@127.0.0.1:$pooler_port/$db" \
  DATABASE_DIRECT_URL="postgres://postgres@$host:$port/$db" \
  npx tap "$@" "${files[@]}"
