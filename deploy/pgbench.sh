#!/usr/bin/env bash
# pgbench's TPC-B-like and select-only scripts against Tessera's PostgreSQL
# listener and a local PostgreSQL, one after the other (docs/performance.md).
#
# Needs: a running cluster (`TESSERA_PGWIRE_PORT=15432 TESSERA_BIN_DIR=<release dir>
# deploy/cluster.sh up`, its admin credentials in $TESSERA_DATA/admin-credentials),
# a PostgreSQL server that user `postgres` reaches locally, and pgbench
# (Debian: postgresql-contrib). Scale 1: 1 branch, 10 tellers, 100,000 accounts.
set -euo pipefail
DATA="${TESSERA_DATA:-$HOME/.local/share/tessera}"
PORT="${TESSERA_PGWIRE_PORT:-15432}"
SECONDS_EACH="${PGBENCH_SECONDS:-15}"
. "$DATA/admin-credentials"
export PGPASSWORD="$ADMIN_PASS"
TESSERA="host=127.0.0.1 port=$PORT user=$ADMIN_USER dbname=pgbench sslmode=disable"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# pgbench's tables with their primary keys (`pgbench -i` loads all accounts in
# one transaction, over the size of one replicated write), loaded by COPY
# outside a transaction.
psql -q "$TESSERA" <<'SQL'
CREATE TABLE pgbench_branches (bid INT PRIMARY KEY, bbalance INT, filler CHAR(88));
CREATE TABLE pgbench_tellers (tid INT PRIMARY KEY, bid INT, tbalance INT, filler CHAR(84));
CREATE TABLE pgbench_accounts (aid INT PRIMARY KEY, bid INT, abalance INT, filler CHAR(84));
CREATE TABLE pgbench_history (tid INT, bid INT, aid INT, delta INT, mtime TIMESTAMP, filler CHAR(22));
SQL
echo "1,0," > "$work/branches.csv"
seq 1 10 | awk '{print $1",1,0,"}' > "$work/tellers.csv"
seq 1 100000 | awk '{print $1",1,0,"}' > "$work/accounts.csv"
start=$(date +%s.%N)
for t in branches tellers accounts; do
  psql -q "$TESSERA" -c "\\copy pgbench_$t FROM '$work/$t.csv' WITH (FORMAT csv)"
done
echo "tessera: loaded $(psql -At "$TESSERA" -c 'SELECT count(*) FROM pgbench_accounts') accounts in $(echo "$(date +%s.%N) - $start" | bc) s"
su postgres -c "psql -q -c 'DROP DATABASE IF EXISTS pgbench' -c 'CREATE DATABASE pgbench'" > /dev/null
su postgres -c "pgbench -q -i -s 1 pgbench" > /dev/null 2>&1

figures() { grep -E "^tps|latency average|failed transactions|retried"; }
for clients in 1 16; do
  echo "== TPC-B-like, $clients clients: tessera"; pgbench -n -c "$clients" -j 2 -T "$SECONDS_EACH" --max-tries=50 "$TESSERA" 2>&1 | figures
  echo "== TPC-B-like, $clients clients: postgresql"; su postgres -c "pgbench -n -c $clients -j 2 -T $SECONDS_EACH pgbench" 2>&1 | figures
done
for clients in 16 64; do
  echo "== select-only, $clients clients: tessera"; pgbench -n -S -c "$clients" -j 2 -T "$SECONDS_EACH" "$TESSERA" 2>&1 | figures
  echo "== select-only, $clients clients: postgresql"; su postgres -c "pgbench -n -S -c $clients -j 2 -T $SECONDS_EACH pgbench" 2>&1 | figures
done
