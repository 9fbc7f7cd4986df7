#!/usr/bin/env bash
# Local three-node Tessera cluster with one router, on 127.0.0.1.
#
#   deploy/cluster.sh up | down | status | stop-node N | start-node N
#   deploy/cluster.sh logs N|router [LINES]      the last lines of a process's log
#   deploy/cluster.sh add-node N                 start node N (4, 5, ...) and add it to the cluster
#   deploy/cluster.sh remove-node N              drain node N, then take it out of the cluster
#   deploy/cluster.sh bench MODE [ARGS]          tessera-bench against this cluster (e.g. kv)
#   deploy/cluster.sh backup [--encrypted]       back up every group into $TESSERA_BACKUPS
#   deploy/cluster.sh restore BACKUP_ID          restore a backup into this (new, empty) cluster
#   deploy/cluster.sh meetings up|down           the meetings application beside the cluster
#                                                (API :8080, web :3000; MEETINGS_API_ADDR /
#                                                MEETINGS_WEB_ADDR move them)
#
# Backups live in $TESSERA_BACKUPS (default ./data/backups, outside the cluster's
# data, so a new cluster can restore them); SERVICE_BACKUP_KEY encrypts them.
# Nodes 1-3 serve gRPC on 9191-9193, the router HTTP on 9090 (TESSERA_NODE_PORT_BASE
# and TESSERA_ROUTER_PORT move them: nodes listen on base+1..base+3; the web console
# is on 8000, TESSERA_CONSOLE_PORT moves it; PostgreSQL clients connect on 5432,
# TESSERA_PGWIRE_PORT moves it). Data lives under
# $TESSERA_DATA (default ./data/cluster). Admin credentials come from
# SERVICE_ADMIN_USERNAME / SERVICE_ADMIN_PASSWORD, or are generated once and kept
# in $TESSERA_DATA/admin-credentials. TESSERA_PROFILE=release builds optimized.
#
# Secure by default: the nodes' gRPC port speaks mutual TLS only. A cluster CA
# and a certificate per process are made once in $TESSERA_CERTS (default
# $TESSERA_DATA/certs, with `tessera-node certs`); bring your own by putting
# ca.pem/ca.key or node-N.pem/.key and router-1.pem/.key there first.
# TESSERA_INSECURE=1 runs plaintext gRPC with no authentication of callers.
# The router's /metrics answers a user holding read:cluster or the bearer token
# made once in $TESSERA_DATA/metrics-token. With TESSERA_NODE_HEALTH_PORT_BASE set,
# node N serves its probes and /metrics (same token) on 127.0.0.1:(base + N).
# The four processes share this machine's cores: each runs a quarter of them as
# Tokio workers (at least one; server.worker_threads), unless
# SERVICE_WORKER_THREADS says otherwise (docs/performance.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="${TESSERA_DATA:-$ROOT/data/cluster}"
PROFILE="${TESSERA_PROFILE:-debug}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tessera/target}"
BIN="${TESSERA_BIN_DIR:-$CARGO_TARGET_DIR/$PROFILE}"
ROUTER_PORT="${TESSERA_ROUTER_PORT:-9090}"
CONSOLE_PORT="${TESSERA_CONSOLE_PORT:-8000}"
PGWIRE_PORT="${TESSERA_PGWIRE_PORT:-5432}"
NODE_BASE="${TESSERA_NODE_PORT_BASE:-9190}"
HEALTH_BASE="${TESSERA_NODE_HEALTH_PORT_BASE:-}"
CORES="$(nproc 2>/dev/null || echo 4)"
WORKERS="${SERVICE_WORKER_THREADS:-$(( CORES / 4 > 1 ? CORES / 4 : 1 ))}"
PEERS="1=127.0.0.1:$((NODE_BASE + 1)),2=127.0.0.1:$((NODE_BASE + 2)),3=127.0.0.1:$((NODE_BASE + 3))"
URL="http://127.0.0.1:$ROUTER_PORT"
BACKUPS="${TESSERA_BACKUPS:-$ROOT/data/backups}"
CERTS="${TESSERA_CERTS:-$DATA/certs}"

log() { printf '%s\n' "$*" >&2; }

build() {
  # The same build as deploy/test.sh's (every binary, same features): RocksDB once.
  [[ -z "${TESSERA_BIN_DIR:-}" ]] && TESSERA_PROFILE="$PROFILE" "$ROOT/deploy/build.sh"
  return 0
}

pidfile() { echo "$DATA/pids/$1.pid"; }

# The env giving process $1 (node-N or router-1) its cluster certificate, made
# when missing; plaintext when TESSERA_INSECURE=1.
transport_env() {
  if [[ "${TESSERA_INSECURE:-0}" == 1 ]]; then echo "SERVICE_CLUSTER_INSECURE=true"; return; fi
  local who="$1"
  case "$who" in
    node-*) "$BIN/tessera-node" certs --dir "$CERTS" --node "${who#node-}" --routers 0 >/dev/null ;;
    *) "$BIN/tessera-node" certs --dir "$CERTS" --routers 1 >/dev/null ;;
  esac
  if [[ "$who" == node-* ]]; then
    echo "SERVICE_CLUSTER_CA=$CERTS/ca.pem SERVICE_NODE_CERT=$CERTS/$who.pem SERVICE_NODE_KEY=$CERTS/$who.key"
  else
    echo "SERVICE_CLUSTER_CA=$CERTS/ca.pem SERVICE_CLUSTER_CLIENT_CERT=$CERTS/$who.pem SERVICE_CLUSTER_CLIENT_KEY=$CERTS/$who.key"
  fi
}

# Ids of every node this cluster has had a data directory for (1-3 at least).
node_ids() {
  { printf '%s\n' 1 2 3; for d in "$DATA"/node-*; do [[ -d "$d" ]] && echo "${d##*/node-}"; done; } | sort -nu
}

running() {
  local f; f="$(pidfile "$1")"
  [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

start_node() {
  local n="$1" peers="$PEERS"
  # Nodes added after bootstrap list themselves too, and always join as "existing".
  [[ -f "$DATA/node-$n/added" ]] && peers="$PEERS,$n=127.0.0.1:$((NODE_BASE + n))"
  if running "node-$n"; then log "node $n already running (pid $(cat "$(pidfile "node-$n")"))"; return; fi
  mkdir -p "$DATA/node-$n" "$DATA/pids" "$DATA/logs"
  # Once the cluster has bootstrapped, a node whose data directory is empty (new or
  # wiped) joins it as "existing": it initializes nothing and does not vote until
  # it has caught up.
  local state=new
  [[ -f "$DATA/bootstrapped" && ! -d "$DATA/node-$n/rocksdb" ]] && state=existing
  [[ -f "$DATA/node-$n/added" ]] && state=existing
  local transport; transport="$(transport_env "node-$n")"
  local health=""
  if [[ -n "$HEALTH_BASE" ]]; then
    metrics_token
    health="SERVICE_HEALTH_ADDR=127.0.0.1:$((HEALTH_BASE + n)) SERVICE_METRICS_TOKEN=$METRICS_TOKEN"
  fi
  # shellcheck disable=SC2086 # the transport and health env are words of VAR=value
  env $transport $health SERVICE_WORKER_THREADS="$WORKERS" SERVICE_NODE_ID="$n" SERVICE_PEERS="$peers" SERVICE_GRPC_ADDR="127.0.0.1:$((NODE_BASE + n))" \
  SERVICE_DATA_DIR="$DATA/node-$n" SERVICE_INITIAL_CLUSTER_STATE="$state" \
    nohup "$BIN/tessera-node" >>"$DATA/logs/node-$n.log" 2>&1 &
  echo $! >"$(pidfile "node-$n")"
  log "node $n started (pid $!, gRPC 127.0.0.1:$((NODE_BASE + n))${HEALTH_BASE:+, probes and metrics 127.0.0.1:$((HEALTH_BASE + n))})"
}

credentials() {
  local f="$DATA/admin-credentials"
  if [[ -n "${SERVICE_ADMIN_USERNAME:-}" && -n "${SERVICE_ADMIN_PASSWORD:-}" ]]; then
    ADMIN_USER="$SERVICE_ADMIN_USERNAME"; ADMIN_PASS="$SERVICE_ADMIN_PASSWORD"
  elif [[ -f "$f" ]]; then
    # shellcheck disable=SC1090
    source "$f"
  else
    ADMIN_USER=admin
    ADMIN_PASS="Ts-$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)-9x"
  fi
  mkdir -p "$DATA"
  printf 'ADMIN_USER=%q\nADMIN_PASS=%q\n' "$ADMIN_USER" "$ADMIN_PASS" >"$f"
  chmod 600 "$f"
}

# The bearer token that reads the router's /metrics without a user (made once,
# kept in $TESSERA_DATA/metrics-token; SERVICE_METRICS_TOKEN overrides it).
metrics_token() {
  local f="$DATA/metrics-token"
  if [[ -n "${SERVICE_METRICS_TOKEN:-}" ]]; then METRICS_TOKEN="$SERVICE_METRICS_TOKEN"
  elif [[ -f "$f" ]]; then METRICS_TOKEN="$(cat "$f")"
  else METRICS_TOKEN="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
  fi
  mkdir -p "$DATA"
  (umask 077; printf '%s' "$METRICS_TOKEN" >"$f")
}

start_router() {
  if running router; then log "router already running (pid $(cat "$(pidfile router)"))"; return; fi
  credentials
  metrics_token
  mkdir -p "$DATA/pids" "$DATA/logs"
  local transport; transport="$(transport_env router-1)"
  # shellcheck disable=SC2086
  env $transport SERVICE_WORKER_THREADS="$WORKERS" SERVICE_HOST=127.0.0.1 SERVICE_PORT="$ROUTER_PORT" SERVICE_NODES="$PEERS" \
  SERVICE_ADMIN_USERNAME="$ADMIN_USER" SERVICE_ADMIN_PASSWORD="$ADMIN_PASS" SERVICE_BACKUP_DIR="$BACKUPS" \
  SERVICE_METRICS_TOKEN="$METRICS_TOKEN" SERVICE_CONSOLE_ENABLED=true SERVICE_CONSOLE_PORT="$CONSOLE_PORT" \
  SERVICE_PGWIRE_ENABLED=true SERVICE_PGWIRE_PORT="$PGWIRE_PORT" \
  nohup "$BIN/tessera-router" >>"$DATA/logs/router.log" 2>&1 &
  echo $! >"$(pidfile router)"
  log "router started (pid $!, $URL)"
}

wait_ready() {
  local deadline=$((SECONDS + ${TESSERA_READY_TIMEOUT:-120}))
  until curl -fsS "$URL/readyz?groups=all" >/dev/null 2>&1; do
    for name in node-1 node-2 node-3 router; do
      if ! running "$name"; then
        log "$name exited during start-up; its log ($DATA/logs/$name.log) ends with:"
        tail -n 15 "$DATA/logs/$name.log" >&2 || true
        exit 1
      fi
    done
    if ((SECONDS > deadline)); then
      log "cluster not ready after ${TESSERA_READY_TIMEOUT:-120}s: $(curl -sS "$URL/readyz?groups=all" 2>&1 || true)"
      log "logs: $DATA/logs"
      exit 1
    fi
    sleep 0.5
  done
}

stop() {
  local name="$1" f; f="$(pidfile "$name")"
  [[ -f "$f" ]] || return 0
  local pid; pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    log "$name stopped"
  fi
  rm -f "$f"
}

status() {
  for name in $(node_ids | sed 's/^/node-/') router; do
    if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; fi
  done
  echo "readyz: $(curl -sS "$URL/readyz?groups=all" 2>/dev/null || echo unreachable)"
}

# A session token of the admin (credentials as `up` printed them).
admin_token() {
  credentials
  local body
  body="$(printf '{"username":"%s","password":"%s"}' "$ADMIN_USER" "$ADMIN_PASS")"
  curl -fsS -H 'content-type: application/json' -d "$body" "$URL/api/v1/auth/login" \
    | sed -n 's/.*"token":"\([^"]*\)".*/\1/p'
}

# Starts node $1 (an id the cluster does not have) as "existing" and adds it
# through the admin API, which moves its share of the replicas to it.
add_node() {
  local n="$1" token addr
  addr="127.0.0.1:$((NODE_BASE + n))"
  mkdir -p "$DATA/node-$n"
  touch "$DATA/node-$n/added"
  start_node "$n"
  token="$(admin_token)"
  [[ -n "$token" ]] || { log "could not log in as the admin"; exit 1; }
  log "adding node $n at $addr (its replicas move to it)"
  curl -sS --fail-with-body -X POST -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d "{\"node_id\": $n, \"address\": \"$addr\"}" "$URL/api/v1/admin/nodes" >&2
  echo >&2
}

# Drains node $1 (its leaderships move away), removes it from every group and
# the cluster map (the node then exits and refuses to start on its data again).
remove_node() {
  local n="$1" token
  token="$(admin_token)"
  [[ -n "$token" ]] || { log "could not log in as the admin"; exit 1; }
  log "draining node $n"
  curl -sS --fail-with-body -X POST -H "authorization: Bearer $token" "$URL/api/v1/admin/nodes/$n/drain" >&2
  echo >&2
  log "removing node $n"
  curl -sS --fail-with-body -X DELETE -H "authorization: Bearer $token" "$URL/api/v1/admin/nodes/$n" >&2
  echo >&2
  rm -f "$(pidfile "node-$n")"
  mkdir -p "$DATA/node-$n" && touch "$DATA/node-$n/removed"
}

# The meetings application (spec 03 part C) against this cluster's router: its
# tables live in the Tessera database `meetings`, reached as the admin; its JWT
# secret is made once in $TESSERA_DATA/meetings-jwt-secret.
start_meetings() {
  if running meetings; then log "meetings already running (pid $(cat "$(pidfile meetings)"))"; return; fi
  credentials
  local secret_file="$DATA/meetings-jwt-secret"
  [[ -f "$secret_file" ]] || (umask 077; head -c 48 /dev/urandom | base64 | tr -d '/+=\n' >"$secret_file")
  local user pass
  user="$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$ADMIN_USER" 2>/dev/null || echo "$ADMIN_USER")"
  pass="$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$ADMIN_PASS" 2>/dev/null || echo "$ADMIN_PASS")"
  mkdir -p "$DATA/pids" "$DATA/logs"
  DATABASE_URL="tessera://$user:$pass@127.0.0.1:$ROUTER_PORT/meetings" JWT_SECRET="$(cat "$secret_file")" \
    MEETINGS_API_ADDR="${MEETINGS_API_ADDR:-127.0.0.1:8080}" MEETINGS_WEB_ADDR="${MEETINGS_WEB_ADDR:-127.0.0.1:3000}" \
    nohup "$BIN/tessera-meetings" >>"$DATA/logs/meetings.log" 2>&1 &
  echo $! >"$(pidfile meetings)"
  local api="http://${MEETINGS_API_ADDR:-127.0.0.1:8080}" deadline=$((SECONDS + 120))
  until curl -fsS "$api/health" >/dev/null 2>&1; do
    running meetings || { log "meetings exited during start-up; its log ($DATA/logs/meetings.log) ends with:"; tail -n 15 "$DATA/logs/meetings.log" >&2; exit 1; }
    ((SECONDS < deadline)) || { log "meetings not healthy after 120 s; logs: $DATA/logs/meetings.log"; exit 1; }
    sleep 0.5
  done
  log "meetings started (pid $(cat "$(pidfile meetings)")): API $api, web http://${MEETINGS_WEB_ADDR:-127.0.0.1:3000}"
}

case "${1:-}" in
  up)
    build
    for n in $(node_ids); do [[ -f "$DATA/node-$n/removed" ]] || start_node "$n"; done
    start_router
    wait_ready
    touch "$DATA/bootstrapped"
    credentials
    cat <<TXT
Tessera is ready at $URL
  admin username: $ADMIN_USER
  admin password: $ADMIN_PASS
  web console: http://127.0.0.1:$CONSOLE_PORT (sign in as the admin above)
  command line: $BIN/tessera login --url $URL -u $ADMIN_USER
  psql: PGPASSWORD='$ADMIN_PASS' psql "host=127.0.0.1 port=$PGWIRE_PORT user=$ADMIN_USER"
  try: curl -s $URL/health
  metrics: curl -s -H "authorization: Bearer \$(cat $DATA/metrics-token)" $URL/metrics
  logs: $DATA/logs
  node gRPC: $( [[ "${TESSERA_INSECURE:-0}" == 1 ]] && echo "PLAINTEXT, no authentication (TESSERA_INSECURE=1)" || echo "mutual TLS, certificates in $CERTS")
TXT
    ;;
  down)
    stop meetings
    stop router
    for n in $(node_ids); do stop "node-$n"; done
    ;;
  status) status ;;
  stop-node)
    [[ "${2:-}" =~ ^[0-9]+$ ]] || { log "usage: $0 stop-node N"; exit 2; }
    stop "node-$2" ;;
  start-node)
    [[ "${2:-}" =~ ^[0-9]+$ ]] || { log "usage: $0 start-node N"; exit 2; }
    start_node "$2" ;;
  logs)
    [[ "${2:-}" =~ ^([0-9]+|router)$ ]] || { log "usage: $0 logs N|router [lines]"; exit 2; }
    name="$2"; [[ "$name" != router ]] && name="node-$name"
    tail -n "${3:-100}" "$DATA/logs/$name.log" ;;
  remove-node)
    [[ "${2:-}" =~ ^[0-9]+$ ]] || { log "usage: $0 remove-node N"; exit 2; }
    remove_node "$2" ;;
  bench)
    shift
    build
    credentials
    SERVICE_ADMIN_USERNAME="$ADMIN_USER" SERVICE_ADMIN_PASSWORD="$ADMIN_PASS" \
      "$BIN/tessera-bench" "$@" --url "$URL" ;;
  add-node)
    [[ "${2:-}" =~ ^[0-9]+$ && "$2" -ge 4 ]] || { log "usage: $0 add-node N   (N >= 4: a new node id)"; exit 2; }
    add_node "$2" ;;
  backup)
    encrypted=false; [[ "${2:-}" == "--encrypted" ]] && encrypted=true
    token="$(admin_token)"; [[ -n "$token" ]] || { log "could not log in as the admin"; exit 1; }
    curl -sS --fail-with-body -X POST -H "authorization: Bearer $token" -H 'content-type: application/json' \
      -d "{\"encrypted\": $encrypted, \"compliance_mode\": \"none\"}" "$URL/api/v1/admin/backup"
    echo ;;
  restore)
    [[ "${2:-}" =~ ^[A-Za-z0-9-]+$ ]] || { log "usage: $0 restore BACKUP_ID   (ls $BACKUPS)"; exit 2; }
    token="$(admin_token)"; [[ -n "$token" ]] || { log "could not log in as the admin"; exit 1; }
    curl -sS --fail-with-body -X POST -H "authorization: Bearer $token" -H 'content-type: application/json' \
      -d "{\"backup_id\": \"$2\"}" "$URL/api/v1/admin/restore"
    echo
    log "restored: users and passwords are the backup's now (log in again)" ;;
  meetings)
    case "${2:-}" in
      up) build; start_meetings ;;
      down) stop meetings ;;
      *) log "usage: $0 meetings up|down"; exit 2 ;;
    esac ;;
  *)
    log "usage: $0 up | down | status | stop-node N | start-node N | logs N|router [LINES] | add-node N | remove-node N | bench MODE | backup [--encrypted] | restore BACKUP_ID | meetings up|down"; exit 2 ;;
esac
