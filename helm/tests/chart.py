#!/usr/bin/env python3
"""Checks and renders the Tessera Helm chart without a Kubernetes cluster.

    chart.py check                 lint (strict) and render the chart with its
                                   defaults and every helm/tessera/ci/*.yaml,
                                   validating each manifest against the
                                   Kubernetes schemas
    chart.py render [-f F] [--set-json J] [--name N] [--namespace NS]
                                   print the rendered manifests as a JSON list
                                   (the boot test reads them)
"""

import argparse
import base64
import json
import pathlib
import sys

import helm_python as helm
import kubernetes_validate
import yaml

CHART = pathlib.Path(__file__).resolve().parent.parent / "tessera"
KUBE_VERSION = "1.30.0"


def deep_merge(base, extra):
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


# Custom resources the Kubernetes schemas do not describe, with the fields
# their operators require.
CUSTOM_RESOURCES = {
    "monitoring.coreos.com/v1": {"ServiceMonitor": ["selector", "endpoints"]},
    "cert-manager.io/v1": {"Certificate": ["secretName", "issuerRef", "commonName"]},
}


def check_custom_resource(label, template, doc):
    required = CUSTOM_RESOURCES[doc["apiVersion"]].get(doc["kind"])
    if required is None:
        raise SystemExit(f"{label}: {template}: unexpected {doc['apiVersion']} kind {doc['kind']}")
    missing = [f for f in required if f not in doc.get("spec", {})]
    if missing or not doc["metadata"].get("name"):
        raise SystemExit(f"{label}: {template}: {doc['kind']} lacks {missing or 'a name'}")
    for endpoint in doc["spec"].get("endpoints", []):
        if not endpoint.get("port") or not endpoint.get("path", "").startswith("/"):
            raise SystemExit(f"{label}: {template}: endpoint without a port name or path: {endpoint}")
        if endpoint.get("authorization", {}).get("credentials", {}).get("key") != "metrics-token":
            raise SystemExit(f"{label}: {template}: endpoint without the metrics token: {endpoint}")
    if doc["kind"] == "Certificate" and not doc["spec"]["issuerRef"].get("name"):
        raise SystemExit(f"{label}: {template}: Certificate without an issuer")


def render(values, name="tessera", namespace="default"):
    """The manifests of an install with `values`, parsed, in file order."""
    chart = helm.Chart.load(CHART)
    chart.validate_schema(values)
    rendered = chart.render(values, name=name, namespace=namespace, is_install=True)
    manifests = []
    for path in sorted(rendered):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.safe_load_all(rendered[path]):
            if doc:
                doc.setdefault("metadata", {}).setdefault("annotations", {})
                manifests.append({"template": path, "manifest": doc})
    return manifests


def check_values(label, values):
    manifests = render(values)
    kinds = sorted({m["manifest"]["kind"] for m in manifests})
    for m in manifests:
        doc = m["manifest"]
        if doc["apiVersion"] in CUSTOM_RESOURCES:
            check_custom_resource(label, m["template"], doc)
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            raise SystemExit(f"{label}: {m['template']} ({doc['kind']}) is not a valid {KUBE_VERSION} object: {e}")
    required = {"StatefulSet", "Deployment", "Service", "ConfigMap"}
    if values.get("podDisruptionBudget", {}).get("enabled", True):
        required.add("PodDisruptionBudget")
    missing = required - set(kinds)
    if missing:
        raise SystemExit(f"{label}: no {sorted(missing)} rendered")
    print(f"ok  {label}: {len(manifests)} manifests ({', '.join(kinds)}) valid for Kubernetes {KUBE_VERSION}")


def check_secure_defaults():
    """The default rendering is secure: mutual TLS with the chart's own
    certificates (a node and a router Secret of one CA), no plaintext switch,
    and a NetworkPolicy letting only nodes and routers reach the gRPC port."""
    docs = [m["manifest"] for m in render({})]
    by_kind = lambda kind: [d for d in docs if d["kind"] == kind]
    secrets = {d["metadata"]["name"]: d for d in by_kind("Secret")}
    for name in ("tessera-cluster-tls-node", "tessera-cluster-tls-router"):
        assert name in secrets and set(secrets[name]["data"]) == {"ca.crt", "tls.crt", "tls.key"}, sorted(secrets)
    assert secrets["tessera-cluster-tls-node"]["data"]["ca.crt"] == secrets["tessera-cluster-tls-router"]["data"]["ca.crt"]
    for workload in by_kind("StatefulSet") + by_kind("Deployment"):
        env = {e["name"] for c in workload["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
        assert "SERVICE_CLUSTER_CA" in env and "SERVICE_CLUSTER_INSECURE" not in env, (workload["metadata"]["name"], env)
    (policy,) = by_kind("NetworkPolicy")
    grpc = [r for r in policy["spec"]["ingress"] if r.get("from")]
    components = sorted(p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for r in grpc for p in r["from"])
    assert components == ["node", "router"], components
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "node"
    plain = [m["manifest"] for m in render({"tls": {"cluster": {"enabled": False}}, "networkPolicy": {"enabled": False}})]
    assert not [d for d in plain if d["kind"] == "NetworkPolicy"]
    sts = next(d for d in plain if d["kind"] == "StatefulSet")
    env = {e["name"]: e.get("value") for c in sts["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
    assert env.get("SERVICE_CLUSTER_INSECURE") == "true", env
    # HTTPS on the routers with a certificate of the same CA; /metrics behind a kept token.
    http = secrets["tessera-http-tls"]["data"]
    assert http["ca.crt"] == secrets["tessera-cluster-tls-node"]["data"]["ca.crt"], "one CA"
    assert set(secrets["tessera-cluster-ca"]["data"]) == {"tls.crt", "tls.key"}
    (router,) = by_kind("Deployment")
    env = {e["name"]: e for c in router["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
    assert "SERVICE_TLS_CERT" in env and env["SERVICE_METRICS_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "metrics-token", env
    probe = router["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    assert probe["scheme"] == "HTTPS", probe
    assert len(secrets["tessera-secrets"]["data"]["metrics-token"]) > 20
    assert not router["spec"]["template"]["metadata"]["annotations"].get("prometheus.io/scrape")
    # cert-manager instead of the chart's own certificates.
    cm = [m["manifest"] for m in render({"tls": {"certManager": {"enabled": True, "issuerRef": {"name": "tessera-ca", "kind": "ClusterIssuer"}}}})]
    certs = {d["spec"]["secretName"]: d for d in cm if d["kind"] == "Certificate"}
    assert sorted(certs) == ["tessera-cluster-tls-node", "tessera-cluster-tls-router", "tessera-http-tls"], sorted(certs)
    assert certs["tessera-cluster-tls-node"]["spec"]["uris"] == ["urn:tessera:role:node"]
    assert certs["tessera-cluster-tls-router"]["spec"]["uris"] == ["urn:tessera:role:router"]
    assert not [d for d in cm if d["kind"] == "Secret" and d["metadata"]["name"] != "tessera-secrets"], "no chart-made certificates"
    print("ok  secure by default: mutual TLS with generated node and router certificates, NetworkPolicy on the gRPC port,"
          " HTTPS routers with a certificate of the same CA, /metrics behind a kept token; cert-manager Certificates on request")


def der_dns_names(pem_b64):
    """The DNS names of a base64 PEM certificate's subjectAltName (the dNSName
    entries, context tag [2], read off the DER without an X.509 library)."""
    pem = base64.b64decode(pem_b64).decode()
    der = base64.b64decode("".join(l for l in pem.splitlines() if l and not l.startswith("-----")))
    names, i = set(), 0
    while (i := der.find(b"\x82", i)) >= 0:
        n = der[i + 1] if i + 1 < len(der) else 0
        text = der[i + 2:i + 2 + n]
        if 0 < n < 0x80 and len(text) == n and all(c in b"abcdefghijklmnopqrstuvwxyz0123456789.-" for c in text):
            names.add(text.decode())
        i += 1
    return names


def meetings_pod(docs):
    deploy = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}["tessera-meetings"]
    spec = deploy["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e for e in container["env"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    return container, env, mounts, volumes


def check_meetings():
    """tessera-meetings: nothing by default; enabled, a Deployment probing
    /health on its API port that signs in with the admin credentials'
    Secret (referenced, not copied), reaches the router Service by its
    in-cluster name over HTTPS, trusting the chart's CA (only ca.crt of the
    routers' HTTPS Secret, mounted read-only; the certificate names that
    host), and takes its JWT key from a kept, generated Secret. Plain HTTP
    with tls.http off; meetings.routerUrl and meetings.routerCa as given."""
    assert not [m for m in render({}) if "meetings" in m["template"]], "meetings off by default"
    docs = [m["manifest"] for m in render({"meetings": {"enabled": True}})]
    named = lambda kind: {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}
    container, env, mounts, volumes = meetings_pod(docs)
    host = "tessera-router.default.svc.cluster.local"
    assert env["MEETINGS_DB_ROUTER"]["value"] == f"tesseras://{host}:9090", env
    assert env["MEETINGS_DATABASE_CA_FILE"]["value"] == "/etc/tessera/router-ca/ca.crt", env
    assert mounts["router-ca"] == {"name": "router-ca", "mountPath": "/etc/tessera/router-ca", "readOnly": True}, mounts
    assert volumes["router-ca"]["secret"]["secretName"] == "tessera-http-tls", volumes
    assert volumes["router-ca"]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}], "only the CA, not the router's key"
    http_tls = named("Secret")["tessera-http-tls"]["data"]
    assert host in der_dns_names(http_tls["tls.crt"]), ("the router certificate lacks the host meetings calls", der_dns_names(http_tls["tls.crt"]))
    assert env["MEETINGS_DB_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "tessera-secrets", "key": "admin-password"}
    assert env["JWT_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "tessera-meetings", "key": "jwt-secret"}
    assert "DATABASE_URL" in container["args"][0] and "exec /usr/local/bin/tessera-meetings" in container["args"][0]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "api"}, container[probe]
    secret = named("Secret")["tessera-meetings"]
    assert len(secret["data"]["jwt-secret"]) >= 64 and secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    ports = sorted(p["port"] for p in named("Service")["tessera-meetings"]["spec"]["ports"])
    assert ports == [3000, 8080], ports
    own = [m["manifest"] for m in render({"meetings": {"enabled": True, "jwtSecret": {"existingSecret": "jwt"}}})]
    assert not [d for d in own if d["kind"] == "Secret" and d["metadata"]["name"] == "tessera-meetings"], "no Secret when the JWT key is given"
    # cert-manager's certificate names the same host; its Secret's ca.crt is mounted.
    cm = [m["manifest"] for m in render({"tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}, "meetings": {"enabled": True}})]
    (cert,) = [d for d in cm if d["kind"] == "Certificate" and d["spec"]["secretName"] == "tessera-http-tls"]
    assert host in cert["spec"]["dnsNames"], cert["spec"]["dnsNames"]
    assert meetings_pod(cm)[3]["router-ca"]["secret"]["secretName"] == "tessera-http-tls"
    # Plain HTTP routers: plain HTTP, no CA.
    plain = [m["manifest"] for m in render({"tls": {"http": {"enabled": False}}, "meetings": {"enabled": True}})]
    container, env, mounts, volumes = meetings_pod(plain)
    assert env["MEETINGS_DB_ROUTER"]["value"] == f"tessera://{host}:9090", env
    assert "MEETINGS_DATABASE_CA_FILE" not in env and "router-ca" not in mounts and "router-ca" not in volumes
    # A router URL: public roots only, or the given CA; a TLS URL without a port means 443.
    for values, router, ca in [
        ({"routerUrl": "https://db.example.com"}, "tesseras://db.example.com:443", None),
        ({"routerUrl": "https://db.example.com:8443", "routerCa": {"existingSecret": "db-ca", "key": "root.pem"}}, "tesseras://db.example.com:8443", ("db-ca", "root.pem")),
        ({"routerUrl": "http://db.example.com"}, "tessera://db.example.com:80", None),
        ({"routerCa": {"existingSecret": "db-ca"}}, f"tesseras://{host}:9090", ("db-ca", "ca.crt")),
    ]:
        _, env, mounts, volumes = meetings_pod([m["manifest"] for m in render({"meetings": {"enabled": True, **values}})])
        assert env["MEETINGS_DB_ROUTER"]["value"] == router, (values, env["MEETINGS_DB_ROUTER"])
        if ca is None:
            assert "MEETINGS_DATABASE_CA_FILE" not in env and "router-ca" not in volumes, values
        else:
            assert env["MEETINGS_DATABASE_CA_FILE"]["value"] == "/etc/tessera/router-ca/ca.crt" and mounts["router-ca"]["readOnly"]
            secret = volumes["router-ca"]["secret"]
            assert (secret["secretName"], secret["items"]) == (ca[0], [{"key": ca[1], "path": "ca.crt"}]), (values, secret)
    print("ok  meetings: off by default; a Deployment probing /health, signed in through the admin Secret, JWT key generated and kept;"
          f" calls tesseras://{host}:9090 trusting ca.crt of tessera-http-tls (mounted read-only, the certificate names the host);"
          " plain HTTP with tls.http off; routerUrl/routerCa as given")


def check():
    report = helm.lint(CHART, strict=True, kube_version=f"v{KUBE_VERSION}")
    problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2] + report.get("errors", [])
    if problems:
        raise SystemExit(f"helm lint --strict: {json.dumps(problems, indent=2)}")
    print(f"ok  helm lint --strict ({report.get('total_charts_linted')} chart)")
    check_values("default values", {})
    check_secure_defaults()
    for path in sorted((CHART / "ci").glob("*.yaml")):
        values = yaml.safe_load(path.read_text()) or {}
        lint = helm.lint(CHART, values, strict=True, kube_version=f"v{KUBE_VERSION}")
        problems = [m for m in lint.get("messages", []) if m.get("severity", 0) >= 2] + lint.get("errors", [])
        if problems:
            raise SystemExit(f"helm lint --strict -f {path.name}: {json.dumps(problems, indent=2)}")
        check_values(path.name, values)
    check_meetings()
    # Values the schema or the templates must refuse.
    for label, bad in [
        ("an unknown key", {"nodes": {"replicas": 3}}),
        ("a wrong type", {"node": {"replicas": "three"}}),
        ("too few nodes for the replication factor", {"node": {"replicas": 2, "initialReplicas": 2}}),
        ("fewer nodes than bootstrapped them", {"node": {"replicas": 2}}),
        ("peer hosts that do not match the replicas", {"node": {"peerHosts": ["a", "b"]}}),
        ("encryption without a key", {"encryption": {"enabled": True}}),
        ("cert-manager without an issuer", {"tls": {"certManager": {"enabled": True}}}),
        ("a meetings CA for a plain-HTTP router", {"tls": {"http": {"enabled": False}}, "meetings": {"enabled": True, "routerCa": {"existingSecret": "ca"}}}),
        ("a meetings JWT secret under 48 characters", {"meetings": {"enabled": True, "jwtSecret": {"value": "short"}}}),
        ("a meetings router URL with a path", {"meetings": {"enabled": True, "routerUrl": "https://db.example.com/api"}}),
    ]:
        try:
            render(bad)
        except helm.HelmError as e:
            print(f"ok  refused {label}: {str(e).splitlines()[0][:120]}")
            continue
        raise SystemExit(f"the chart rendered with {label}: {bad}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    r = sub.add_parser("render")
    r.add_argument("-f", "--values", action="append", default=[])
    r.add_argument("--set-json", action="append", default=[], help="a JSON object merged over the values")
    r.add_argument("--name", default="tessera")
    r.add_argument("--namespace", default="default")
    args = parser.parse_args()
    if args.command == "check":
        check()
        return
    values = {}
    for f in args.values:
        deep_merge(values, yaml.safe_load(pathlib.Path(f).read_text()) or {})
    for j in args.set_json:
        deep_merge(values, json.loads(j))
    json.dump(render(values, args.name, args.namespace), sys.stdout)


if __name__ == "__main__":
    main()
