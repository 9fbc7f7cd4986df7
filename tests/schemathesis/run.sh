#!/usr/bin/env bash
# Fuzzes the router's OpenAPI document against a real three-node cluster with
# schemathesis (pinned), every check on, exclusions in schemathesis.toml.
# Fails on any finding. Run by deploy/test.sh; alone:
#
#   tests/schemathesis/run.sh [--max-time SECONDS] [--seed N]
#
# The cluster (nodes on 19191-19193, router on 19090) lives in a temporary
# directory and is taken down on exit. One worker, so a seed replays the same
# run (two would race each other's requests: an export aborted by a delete).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/schemathesis"
VERSION=4.32.5
VENV="${SCHEMATHESIS_VENV:-$HOME/.cache/tessera/schemathesis-$VERSION}"
MAX_TIME=240
SEED=20261129
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-time) MAX_TIME="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

if [[ ! -x "$VENV/bin/st" ]]; then
  python3 -m venv "$VENV" 2>/dev/null || { sudo -n true 2>/dev/null && S=sudo || S=; $S apt-get install -y -q python3-venv >/dev/null; python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q "schemathesis==$VERSION"
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tessera/target}"
export TESSERA_BIN_DIR="${TESSERA_BIN_DIR:-$CARGO_TARGET_DIR/debug}"
export TESSERA_DATA; TESSERA_DATA="$(mktemp -d /tmp/tessera-schemathesis.XXXXXX)"
export TESSERA_ROUTER_PORT=19090 TESSERA_NODE_PORT_BASE=19190
export SERVICE_ADMIN_USERNAME=admin SERVICE_ADMIN_PASSWORD="Fuzz-admin-1-$(head -c 12 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
# The vault unsealed and a backup key set, so their routes answer; no rate
# limit, so every generated request reaches its handler.
export SERVICE_VAULT_PASSPHRASE="fuzz-vault-passphrase" SERVICE_BACKUP_KEY; SERVICE_BACKUP_KEY="$(head -c 32 /dev/urandom | base64)"
export SERVICE_REQUESTS_PER_MINUTE=100000000 SERVICE_BACKUP_DIR="$TESSERA_DATA/backups"
cleanup() { "$ROOT/deploy/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$TESSERA_DATA"; }
trap cleanup EXIT
"$ROOT/deploy/cluster.sh" up >/dev/null

URL="http://127.0.0.1:$TESSERA_ROUTER_PORT"
# Signs in as the admin once the cluster serves it (the first login waits for
# the meta group's leader and the admin's bootstrap).
login() {
  curl -sf -m 10 -X POST "$URL/api/v1/auth/login" -H 'content-type: application/json' \
    -d "{\"username\": \"admin\", \"password\": \"$SERVICE_ADMIN_PASSWORD\"}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' 2>/dev/null
}
deadline=$((SECONDS + 120))
until TOKEN="$(login)"; do
  if ((SECONDS > deadline)); then echo "the admin could not sign in within 120 s" >&2; exit 1; fi
  sleep 1
done

REPORTS="${SCHEMATHESIS_REPORTS:-/tmp/tessera-schemathesis-reports}"
rm -rf "$REPORTS"
cd "$TESSERA_DATA"  # schemathesis keeps its cache (.schemathesis/) in the working directory
"$VENV/bin/st" --config-file "$HERE/schemathesis.toml" run "$URL/api/v1/openapi.json" \
  -H "Authorization: Bearer $TOKEN" --seed "$SEED" --max-time "$MAX_TIME" \
  --workers 1 --max-examples 25 --no-color --report ndjson --report-dir "$REPORTS"
