#!/usr/bin/env bash
# Checks deploy/docker-compose.yml without a container engine: docker-compose
# parses and validates it against the Compose schema (`config -q`), then its
# structure is checked (three nodes and a router, healthchecks, the router
# waiting on healthy nodes, named volumes, peers naming every node service).
# Also checks deploy/Dockerfile's shape. Builds the image only when an OCI
# builder (docker or podman) is present and TESSERA_BUILD_IMAGE=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMPOSE="$ROOT/deploy/docker-compose.yml"
PY="${TESSERA_CHART_PYTHON:-$("$ROOT/deploy/chart-prerequisites.sh")}"
export TESSERA_ADMIN_PASSWORD="${TESSERA_ADMIN_PASSWORD:-Check-Only-Passw0rd!}"
docker-compose -f "$COMPOSE" config -q
docker-compose -f "$COMPOSE" config | "$PY" -c '
import sys, yaml
c = yaml.safe_load(sys.stdin)
services = c["services"]
nodes = sorted(n for n in services if n.startswith("node"))
# Secure by default: certificates made before anything starts, every process given its own.
assert services["certs"]["command"][:2] == ["tessera-node", "certs"], services["certs"]
assert "SERVICE_CLUSTER_INSECURE" not in str(c), "the compose file runs plaintext"
assert services["router"]["environment"]["SERVICE_CLUSTER_CLIENT_CERT"].endswith("router-1.pem")
assert nodes == ["node1", "node2", "node3"], nodes
peers = services["router"]["environment"]["SERVICE_NODES"]
for i, n in enumerate(nodes, 1):
    s = services[n]
    env = s["environment"]
    assert env["SERVICE_NODE_ID"] == str(i), (n, env)
    assert env["SERVICE_NODE_CERT"].endswith(f"node-{i}.pem") and env["SERVICE_CLUSTER_CA"], (n, env)
    assert s["depends_on"]["certs"]["condition"] == "service_completed_successfully", n
    assert env["SERVICE_PEERS"] == peers, (n, env["SERVICE_PEERS"], peers)
    assert f"{i}={n}:9191" in peers, (n, peers)
    assert "readyz" in " ".join(s["healthcheck"]["test"]), n
    mounts = [(v["source"], v["target"]) if isinstance(v, dict) else tuple(v.split(":")[:2]) for v in s["volumes"]]
    assert (f"{n}-data", "/var/lib/tessera") in mounts, s["volumes"]
    assert ("certs", "/etc/tessera/certs") in mounts, s["volumes"]
    assert f"{n}-data" in c["volumes"], n
router = services["router"]
assert all(router["depends_on"][n]["condition"] == "service_healthy" for n in nodes), router["depends_on"]
assert "readyz" in " ".join(router["healthcheck"]["test"])
port = router["ports"][0]
assert (port["target"] if isinstance(port, dict) else int(str(port).split(":")[-1].split("/")[0])) == 9090, router["ports"]
print("ok  deploy/docker-compose.yml: 3 nodes and a router, healthchecks, depends_on service_healthy, named volumes")
'
dockerfile="$ROOT/deploy/Dockerfile"
grep -q '^FROM .* AS build' "$dockerfile"
grep -q '^USER 10001' "$dockerfile"
grep -q '^HEALTHCHECK' "$dockerfile"
grep -q 'COPY --from=build .*tessera-node .*tessera-router' "$dockerfile"
echo "ok  deploy/Dockerfile: multi-stage, non-root, HEALTHCHECK, both binaries"
if [[ "${TESSERA_BUILD_IMAGE:-0}" == 1 ]]; then
  builder="$(command -v docker || command -v podman || true)"
  if [[ -z "$builder" ]]; then echo "TESSERA_BUILD_IMAGE=1 but neither docker nor podman is installed" >&2; exit 1; fi
  "$builder" build -f "$dockerfile" -t tessera:check "$ROOT"
  "$builder" run --rm tessera:check tessera-node --version
fi
