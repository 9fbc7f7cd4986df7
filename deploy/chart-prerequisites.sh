#!/usr/bin/env bash
# Installs what the deployment checks need, when missing: a Python virtual
# environment with the chart's pinned checkers (helm/tests/requirements.txt: a
# Helm v4 engine and the Kubernetes schemas, no cluster) and Debian's
# docker-compose (checks deploy/docker-compose.yml; no container engine needed).
# Prints the virtual environment's python.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TESSERA_CHART_VENV:-$HOME/.cache/tessera/chart-venv}"
REQ="$ROOT/helm/tests/requirements.txt"
packages=()
command -v python3 >/dev/null 2>&1 || packages+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || packages+=(python3-venv)
command -v docker-compose >/dev/null 2>&1 || packages+=(docker-compose)
if ((${#packages[@]})); then
  echo "installing: ${packages[*]} (deployment checks)" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi
stamp="$VENV/.requirements"
if [[ ! -x "$VENV/bin/python" ]] || ! cmp -s "$REQ" "$stamp"; then
  echo "preparing the chart checkers in $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$stamp"
fi
echo "$VENV/bin/python"
