#!/usr/bin/env bash
# The router's OpenAPI document as a contract, against a real three-node cluster:
# 1. a Python client generated from it (openapi-python-client, pinned) runs a
#    smoke scenario (client_smoke.py);
# 2. schemathesis (pinned) fuzzes every operation, every check on, and fails on
#    any finding; the exclusions, each with its reason, are in schemathesis.toml.
# Run by deploy/test.sh; alone:
#
#   tests/contract/run.sh [--max-time SECONDS] [--seed N]
#
# The cluster (nodes on 19191-19193, router on 19090) lives in a temporary
# directory and is taken down on exit. One worker, so a seed replays the same
# run (two would race each other's requests: an export aborted by a delete).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/contract"
VERSION=4.32.5
VENV="${SCHEMATHESIS_VENV:-$HOME/.cache/tessera/schemathesis-$VERSION}"
GENERATOR_VERSION=0.29.1
GENERATOR_VENV="$HOME/.cache/tessera/openapi-python-client-$GENERATOR_VERSION"
MAX_TIME=240
SEED=20261129
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-time) MAX_TIME="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

# A virtual environment at $1 holding the pinned package $2.
venv_with() {
  local dir="$1" package="$2"
  if [[ ! -f "$dir/.installed-$package" ]]; then
    rm -rf "$dir"
    python3 -m venv "$dir" 2>/dev/null || {
      SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
      $SUDO apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$dir"
    }
    "$dir/bin/pip" install -q "$package"
    touch "$dir/.installed-$package"
  fi
}
venv_with "$VENV" "schemathesis==$VERSION"
venv_with "$GENERATOR_VENV" "openapi-python-client==$GENERATOR_VERSION"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tessera/target}"
export TESSERA_BIN_DIR="${TESSERA_BIN_DIR:-$CARGO_TARGET_DIR/debug}"
export TESSERA_DATA; TESSERA_DATA="$(mktemp -d /tmp/tessera-schemathesis.XXXXXX)"
export TESSERA_ROUTER_PORT=19090 TESSERA_NODE_PORT_BASE=19190 TESSERA_CONSOLE_PORT=18000
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

echo "== a client generated from $URL/api/v1/openapi.json"
curl -sf "$URL/api/v1/openapi.json" -o "$TESSERA_DATA/openapi.json"
(cd "$TESSERA_DATA" && "$GENERATOR_VENV/bin/openapi-python-client" generate --path openapi.json --meta setup \
  --output-path client >/dev/null 2>"$TESSERA_DATA/generate.log") || { cat "$TESSERA_DATA/generate.log" >&2; exit 1; }
"$GENERATOR_VENV/bin/pip" install -q --no-deps --force-reinstall "$TESSERA_DATA/client"
"$GENERATOR_VENV/bin/python" "$HERE/client_smoke.py" "$URL" admin "$SERVICE_ADMIN_PASSWORD"

echo "== schemathesis $VERSION"
REPORTS="${SCHEMATHESIS_REPORTS:-/tmp/tessera-schemathesis-reports}"
rm -rf "$REPORTS"
cd "$TESSERA_DATA"  # schemathesis keeps its cache (.schemathesis/) in the working directory
# Bounded: a stuck run (schemathesis once hung on a crashed worker) ends.
timeout $((MAX_TIME + 300)) "$VENV/bin/st" --config-file "$HERE/schemathesis.toml" run "$URL/api/v1/openapi.json" \
  -H "Authorization: Bearer $TOKEN" --seed "$SEED" --max-time "$MAX_TIME" \
  --workers 1 --max-examples 25 --no-color --report ndjson --report-dir "$REPORTS"
