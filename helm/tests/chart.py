#!/usr/bin/env python3
"""Checks and renders the Tessera Helm chart without a Kubernetes cluster.

    chart.py check                 lint (strict) and render the chart with its
                                   defaults and every helm/tessera/ci/*.yaml,
                                   validating each manifest against the
                                   Kubernetes schemas
    chart.py render [-f F] [--set-json J] [--name N] [--namespace NS] [--upgrade]
                    [--existing-replicas R]
                                   print the rendered manifests as a JSON list
                                   (the boot test reads them); --upgrade renders
                                   an upgrade with nothing looked up, as
                                   `helm template --is-upgrade` or
                                   `helm upgrade --dry-run=client` do;
                                   --existing-replicas renders, hooks included,
                                   the upgrade of a release installed with the
                                   same values but node.replicas=R into a fake
                                   API server (`lookup` finds its StatefulSet:
                                   with R above node.replicas, the scale-down Job)
"""

import argparse
import base64
import difflib
import http.server
import json
import os
import pathlib
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time

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


def parse_manifests(rendered):
    """{template path: text} as [{"template", "manifest"}], in file order."""
    manifests = []
    for path in sorted(rendered):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.safe_load_all(rendered[path]):
            if doc:
                doc.setdefault("metadata", {}).setdefault("annotations", {})
                manifests.append({"template": path, "manifest": doc})
    return manifests


def render(values, name="tessera", namespace="default", upgrade=False, chart_dir=CHART):
    """The manifests of an install with `values`, parsed, in file order. With
    `upgrade`, those of an upgrade (.Release.IsUpgrade) on which `lookup`
    finds nothing: what `helm template --is-upgrade`, `helm upgrade
    --dry-run=client` and a GitOps tool rendering an upgrade see."""
    chart = helm.Chart.load(chart_dir)
    chart.validate_schema(values)
    rendered = chart.render(values, name=name, namespace=namespace, is_install=not upgrade, is_upgrade=upgrade)
    return parse_manifests(rendered)


# The API groups and kinds of the chart's objects, served by FakeCluster's discovery.
FAKE_API = {
    "v1": [("secrets", "Secret"), ("configmaps", "ConfigMap"), ("services", "Service"), ("serviceaccounts", "ServiceAccount")],
    "apps/v1": [("statefulsets", "StatefulSet"), ("deployments", "Deployment")],
    "batch/v1": [("jobs", "Job")],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget")],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy")],
    "monitoring.coreos.com/v1": [("servicemonitors", "ServiceMonitor")],
    "cert-manager.io/v1": [("certificates", "Certificate")],
}


class FakeCluster:
    """Just enough of a Kubernetes API server (on loopback) for a real Helm
    install and upgrade: discovery of the chart's kinds, objects created by
    POST kept and answered by GET (so `lookup` finds what the install made),
    release history in Helm's memory driver. Upgrades run as
    `helm upgrade --dry-run=server`: rendered with `lookup` against this
    cluster, nothing applied."""

    def __init__(self, namespace="default"):
        self.namespace = namespace
        self.objects = {}
        cluster = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                path = self.path.split("?")[0].rstrip("/")
                if path == "/version":
                    return self.reply(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0"})
                if path == "/api":
                    return self.reply(200, {"kind": "APIVersions", "versions": ["v1"]})
                if path == "/apis":
                    groups = [{"name": gv.split("/")[0], "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                               "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]}} for gv in FAKE_API if "/" in gv]
                    return self.reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
                for gv, resources in FAKE_API.items():
                    if path == ("/api/" if gv == "v1" else "/apis/") + gv:
                        return self.reply(200, {"kind": "APIResourceList", "groupVersion": gv, "resources": [
                            {"name": n, "singularName": "", "namespaced": True, "kind": k,
                             "verbs": ["get", "list", "create", "update", "patch", "delete"]} for n, k in resources]})
                if path in cluster.objects:
                    return self.reply(200, cluster.objects[path])
                self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                cluster.objects[f"{self.path.split('?')[0].rstrip('/')}/{body['metadata']['name']}"] = body
                self.reply(201, body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        server = f"http://127.0.0.1:{self.server.server_address[1]}"
        kubeconfig = yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": server}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": self.namespace}}],
        })
        self.config = helm.Config(kubeconfig_content=kubeconfig, storage_driver="memory", namespace=self.namespace)
        return self

    def __exit__(self, *exc):
        self.config.close()
        self.server.shutdown()
        self.server.server_close()

    def secret(self, name):
        """The data of the Secret `name` in the cluster (base64 values), or None."""
        found = self.objects.get(f"/api/v1/namespaces/{self.namespace}/secrets/{name}")
        return None if found is None else found.get("data", {})

    def _release(self, action, values, name, **opts):
        chart = helm.Chart.load(CHART)
        chart.validate_schema(values)
        # The library's own wrapper offers no disable_openapi_validation (this
        # server has no OpenAPI documents) nor disable_hooks (no Job is awaited).
        options = {"namespace": self.namespace, "disable_openapi_validation": True, "disable_hooks": True, **opts}
        release = json.loads(helm._native.call_string(
            action, self.config._raw(), helm._native.HANDLE(0), chart._raw(), None, name, json.dumps(values), json.dumps(options)))
        return parse_manifests({"manifest.yaml": release["manifest"]})

    def install(self, values, name="tessera"):
        """`helm install`: the objects are created here; answers the manifests."""
        return self._release("helm_install", values, name, server_side_apply=False)

    def upgrade(self, values, name="tessera"):
        """`helm upgrade --dry-run=server`: rendered with `lookup` against
        this cluster; answers the manifests, applies nothing."""
        return self._release("helm_upgrade", values, name, dry_run="server")

    def render_upgrade(self, values, name="tessera"):
        """Every template of an upgrade rendered with `lookup` against this
        cluster, hooks included (what `helm upgrade` renders; the release of
        `upgrade` above holds the manifest without its hooks)."""
        chart = helm.Chart.load(CHART)
        chart.validate_schema(values)
        return parse_manifests(self.config.render(chart, values, name=name, namespace=self.namespace, is_install=False, is_upgrade=True))

    def statefulset(self, name):
        """The StatefulSet `name` in the cluster, or None."""
        return self.objects.get(f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{name}")


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


def expect_refusal(label, make):
    """The message of the HelmError `make()` raises; exits when it renders."""
    try:
        make()
    except helm.HelmError as e:
        return str(e)
    raise SystemExit(f"the chart rendered {label}")


def secret_data(docs, name):
    """The data of the rendered Secret `name` (base64 values), or None."""
    found = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == name]
    return found[0].get("data", {}) if found else None


def docs_of(manifests):
    return [m["manifest"] for m in manifests]


KEY = "q6Yc1kDq3s1f3O0bq2h8QmC2Zt3y5lP9wXo4sVb7nAk="
OTHER_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def check_secrets_on_upgrade():
    """Issue item 4, secrets drift. A generated secret (admin password,
    metrics token, meetings JWT key, the cluster CA) is found with `lookup` on
    an upgrade; where `lookup` finds nothing on an upgrade (helm template
    --is-upgrade, helm upgrade --dry-run=client, a GitOps render, or the
    Secret is gone), the render is refused, naming the value to pass and the
    command that reads it, rather than writing a new random secret the routers
    (which create the admin once) or the running pods do not know. A real
    install then upgrade (against FakeCluster) keeps every generated secret,
    and an upgrade whose encryption.key differs from the one the nodes' data
    was sealed with is refused, unless the old key is kept as a previous key
    (a rotation)."""
    msg = expect_refusal("an upgrade that cannot read its generated secrets (a new random admin password and metrics token)",
                         lambda: render({}, upgrade=True))
    for needle in ("auth.adminPassword", "metrics.token", "kubectl -n default get secret tessera-secrets"):
        assert needle in msg, (needle, msg)
    given = {"auth": {"adminPassword": "Given-Passw0rd!"}, "metrics": {"token": "given-metrics-token"}}
    existing_tls = {"tls": {"cluster": {"existingSecret": "n", "existingRouterSecret": "r"}, "http": {"existingSecret": "h"}}}
    data = secret_data(docs_of(render({**given, **existing_tls}, upgrade=True)), "tessera-secrets")
    assert base64.b64decode(data["admin-password"]) == b"Given-Passw0rd!" and base64.b64decode(data["metrics-token"]) == b"given-metrics-token", data
    msg = expect_refusal("an upgrade that cannot read the chart's cluster CA (a new CA the running pods do not trust)",
                         lambda: render(given, upgrade=True))
    assert "tessera-cluster-ca" in msg and "tls.allowNewCaOnUpgrade" in msg, msg
    docs = docs_of(render({**given, "tls": {"allowNewCaOnUpgrade": True}}, upgrade=True))
    assert secret_data(docs, "tessera-cluster-ca"), "a new CA when asked for"
    render({**given, "tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}}, upgrade=True)
    render({"auth": {"existingSecret": "a"}, "metrics": {"existingSecret": "m"}, **existing_tls}, upgrade=True)
    msg = expect_refusal("an upgrade that cannot read the generated meetings JWT key",
                         lambda: render({**given, **existing_tls, "meetings": {"enabled": True}}, upgrade=True))
    assert "meetings.jwtSecret.value" in msg, msg
    # A real install, then upgrades that find (lookup) what it made.
    values = {"encryption": {"enabled": True, "key": KEY}, "meetings": {"enabled": True}}
    kept = ["tessera-secrets", "tessera-cluster-ca", "tessera-cluster-tls-node", "tessera-cluster-tls-router", "tessera-http-tls", "tessera-meetings"]
    with FakeCluster() as cluster:
        cluster.install(values)
        made = {name: cluster.secret(name) for name in kept}
        assert all(made.values()), {k: bool(v) for k, v in made.items()}
        upgraded = docs_of(cluster.upgrade(values))
        for name in kept:
            assert secret_data(upgraded, name) == made[name], f"the upgrade rewrote {name}"
        msg = expect_refusal("an upgrade with another encryption.key than the nodes' Secret holds",
                             lambda: cluster.upgrade({**values, "encryption": {"enabled": True, "key": OTHER_KEY}}))
        assert "encryption.key" in msg and "tessera-secrets" in msg, msg
        # A rotation (docs/tls-encryption.md): the new key, the old one as a previous key.
        rotation = {**values, "encryption": {"enabled": True, "key": OTHER_KEY},
                    "node": {"extraEnv": [{"name": "SERVICE_ENCRYPTION_PREVIOUS_KEYS", "value": KEY}]}}
        rotated = secret_data(docs_of(cluster.upgrade(rotation)), "tessera-secrets")
        assert base64.b64decode(rotated["encryption-key"]).decode() == OTHER_KEY, rotated
    print("ok  secrets on upgrade: kept (lookup) on a real upgrade; an upgrade that cannot read them is refused with the"
          " command to pass them (admin password, metrics token, meetings JWT key; the CA unless tls.allowNewCaOnUpgrade);"
          " a changed encryption.key refused unless the old one stays a previous key (rotation)")


def diff(a, b):
    """The lines where two objects' YAML differ (for messages)."""
    return "\n".join(difflib.unified_diff(yaml.safe_dump(a).splitlines(), yaml.safe_dump(b).splitlines(), lineterm="", n=1))


def pod_templates(docs):
    """{(kind, name): pod template} of every workload."""
    out = {}
    for d in docs:
        if d["kind"] in ("StatefulSet", "Deployment", "Job"):
            out[(d["kind"], d["metadata"]["name"])] = d["spec"]["template"]
    return out


def sts_of(docs):
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    return sts


def check_no_needless_restarts():
    """Issue item 5: the StatefulSet's pod template (what rolls the database)
    does not change (a) with node.replicas (SERVICE_PEERS lists the bootstrap
    nodes, each pod advertises its own address from its name; the routers'
    SERVICE_NODES too, the rest comes from the cluster map), (b) with the
    router's configuration (checksum/config hashes node.toml alone; the
    router's, router.toml alone), (c) with the chart's version (helm.sh/chart
    is on object metadata, not on pod templates)."""
    three = docs_of(render({"node": {"replicas": 3, "initialReplicas": 3}}))
    five = docs_of(render({"node": {"replicas": 5, "initialReplicas": 3}}))
    a, b = sts_of(three)["spec"]["template"], sts_of(five)["spec"]["template"]
    assert a == b, f"scaling node.replicas 3 -> 5 changes the StatefulSet's pod template (every node restarts):\n{diff(a, b)}"
    ra, rb = pod_templates(three)[("Deployment", "tessera-router")], pod_templates(five)[("Deployment", "tessera-router")]
    assert ra == rb, f"scaling node.replicas 3 -> 5 changes the routers' pod template (every router restarts):\n{diff(ra, rb)}"
    (container,) = b["spec"]["containers"]
    names = [e["name"] for e in container["env"]]
    env = {e["name"]: e for e in container["env"]}
    host = "tessera-node-{}.tessera-node-headless.default.svc.cluster.local:9191"
    assert env["SERVICE_PEERS"]["value"] == ",".join(f"{i + 1}={host.format(i)}" for i in range(3)), env["SERVICE_PEERS"]
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", env["POD_NAME"]
    assert env["SERVICE_ADVERTISE_ADDR"]["value"] == "$(POD_NAME).tessera-node-headless.default.svc.cluster.local:9191", env["SERVICE_ADVERTISE_ADDR"]
    assert names.index("POD_NAME") < names.index("SERVICE_ADVERTISE_ADDR"), "$(POD_NAME) expands only from an earlier variable"
    (job,) = hook_jobs(five, "registration")
    added = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}["NODES_TO_ADD"]
    assert added == f"4={host.format(3)},5={host.format(4)}", added
    peer_hosts = docs_of(render({"node": {"replicas": 4, "initialReplicas": 3, "peerHosts": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]}}))
    env = {e["name"]: e.get("value") for e in sts_of(peer_hosts)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SERVICE_PEERS"] == "1=10.0.0.1:9191,2=10.0.0.2:9191,3=10.0.0.3:9191", env["SERVICE_PEERS"]
    assert env["SERVICE_ADVERTISE_ADDR"] == "$(POD_IP):9191", env["SERVICE_ADVERTISE_ADDR"]
    # (b) Each workload hashes its own configuration.
    base = pod_templates(docs_of(render({})))
    router_debug = pod_templates(docs_of(render({"router": {"logLevel": "debug"}})))
    node_debug = pod_templates(docs_of(render({"node": {"logLevel": "debug"}})))
    sts, router = ("StatefulSet", "tessera-node"), ("Deployment", "tessera-router")
    assert base[sts] == router_debug[sts], f"router.logLevel rolls the nodes:\n{diff(base[sts], router_debug[sts])}"
    assert base[router] != router_debug[router], "router.logLevel must roll the routers"
    assert base[router] == node_debug[router], f"node.logLevel rolls the routers:\n{diff(base[router], node_debug[router])}"
    assert base[sts] != node_debug[sts], "node.logLevel must roll the nodes"
    # (c) A new chart version (same appVersion) rolls nothing.
    values = {"node": {"replicas": 5, "initialReplicas": 3}, "meetings": {"enabled": True}}
    with tempfile.TemporaryDirectory() as tmp:
        bumped = pathlib.Path(tmp) / "tessera"
        shutil.copytree(CHART, bumped)
        meta = bumped / "Chart.yaml"
        meta.write_text(meta.read_text().replace("\nversion: ", "\nversion: 99.0.0-", 1))
        before = docs_of(render(values))
        after = docs_of(render(values, chart_dir=bumped))
    old, new = pod_templates(before), pod_templates(after)
    assert sorted(old) == sorted(new)
    for key in old:
        assert old[key] == new[key], f"a chart version change rolls {key}:\n{diff(old[key], new[key])}"
    assert all(d["metadata"]["labels"]["helm.sh/chart"].startswith("tessera-99.0.0-") for d in after), "helm.sh/chart stays on the objects"
    print("ok  no needless restarts: the StatefulSet's and the routers' pod templates are the same for 3 and 5 replicas (bootstrap"
          " peers, SERVICE_ADVERTISE_ADDR from $(POD_NAME), routers learn the others from the map), for another router"
          " configuration and another chart version")


# Name limits: a StatefulSet's pods carry controller-revision-hash =
# <name>-<10 characters>, a label value (at most 63); a CronJob's Jobs are
# <name>-<11 digits>. Everything else: 63 (Services are DNS-1035 labels, Jobs
# and pods' names become label values).
NAME_LIMITS = {"StatefulSet": 52, "CronJob": 52}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_maps(doc):
    """Every label map of an object (its own, selectors, templates')."""
    spec = doc.get("spec", {})
    yield doc["metadata"].get("labels") or {}
    if doc["kind"] == "Service":
        yield spec.get("selector") or {}
    if isinstance(spec.get("selector"), dict):
        yield spec["selector"].get("matchLabels") or {}
    if "template" in spec:
        yield spec["template"].get("metadata", {}).get("labels") or {}
    for claim in spec.get("volumeClaimTemplates", []):
        yield claim.get("metadata", {}).get("labels") or {}
    if "podSelector" in spec:
        yield spec["podSelector"].get("matchLabels") or {}


def release_name(length, last="a"):
    """A valid release name of `length` characters (without the chart's name,
    so the full name is <release>-tessera)."""
    stem = "production-eu-west-1-analytics-database-cluster-number-0000000000"
    return stem[:length - 1] + last


def check_name_lengths():
    """Issue item 7: with release names of 45 and 53 characters (Helm's
    maximum) every object name fits its limit (52 for StatefulSets, 63
    otherwise), pod host names and label values fit 63, Certificates' common
    names 64, and two long releases get distinct names; a fullnameOverride
    that cannot fit is refused."""
    values = {"node": {"replicas": 5, "initialReplicas": 3}, "meetings": {"enabled": True}, "metrics": {"serviceMonitor": {"enabled": True}}}
    cert_manager = {**values, "tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}}
    seen = {}
    for length in (45, 53):
        name = release_name(length)
        assert len(name) == length, name
        for variant in (values, cert_manager):
            docs = docs_of(render(variant, name=name))
            for d in docs:
                kind, obj = d["kind"], d["metadata"]["name"]
                limit = NAME_LIMITS.get(kind, 63)
                assert len(obj) <= limit and DNS_LABEL.match(obj), f"release {name!r} ({length}): {kind} {obj!r} is {len(obj)} characters (at most {limit})"
                if kind == "Service":
                    assert DNS_1035.match(obj), f"{kind} {obj!r} is not a DNS-1035 label"
                if kind == "StatefulSet":
                    last = f"{obj}-{d['spec']['replicas'] - 1}"
                    assert len(f"{obj}-0123456789") <= 63 and len(last) <= 63, (obj, last)
                    assert d["spec"]["serviceName"] in {x["metadata"]["name"] for x in docs if x["kind"] == "Service"}
                if kind == "Certificate":
                    assert len(d["spec"]["commonName"]) <= 64, d["spec"]["commonName"]
                for labels in label_maps(d):
                    for key, value in labels.items():
                        value = str(value)
                        assert len(value) <= 63 and LABEL_VALUE.match(value), f"release {name!r}: {kind} {obj}: label {key}={value!r} ({len(value)} characters)"
                for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                    for e in c.get("env", []):
                        if e["name"] in ("SERVICE_ADVERTISE_ADDR", "SERVICE_PEERS", "SERVICE_NODES", "NODES_TO_ADD"):
                            hosts = [p.split("=")[-1].rsplit(":", 1)[0].replace("$(POD_NAME)", f"{sts_of(docs)['metadata']['name']}-9") for p in e.get("value", "").split(",") if p]
                            assert all(len(label) <= 63 for h in hosts for label in h.split(".")), (e["name"], hosts)
            seen.setdefault(length, set()).add(sts_of(docs)["metadata"]["name"])
    other = docs_of(render(values, name=release_name(53, last="b")))
    assert sts_of(other)["metadata"]["name"] not in seen[53], "two long release names that differ only at the end share the StatefulSet's name"
    msg = expect_refusal("a fullnameOverride too long for the StatefulSet's revision-hash label",
                         lambda: render({"fullnameOverride": "f" * 48}))
    assert "fullnameOverride" in msg and "47" in msg, msg
    print("ok  names: release names of 45 and 53 characters fit every object name (StatefulSet <= 52, others <= 63),"
          " host name and label value; distinct for distinct releases; a too long fullnameOverride refused")


def containers_of(doc):
    return {c["name"]: c for c in doc["spec"]["template"]["spec"]["containers"]}


def check_operations():
    """Issue item 8: the ServiceMonitor checks the routers' HTTPS certificate
    (tlsConfig: the chart's CA, a server name the certificate carries), probes,
    priorityClassName, affinity, extra volumes, the StatefulSet's update
    partition, a router PodDisruptionBudget and fsGroupChangePolicy come from
    values; the templates refuse a preStop longer than the grace period and
    Raft timings out of order."""
    docs = docs_of(render({"metrics": {"serviceMonitor": {"enabled": True}}}))
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    endpoints = {e["port"]: e for e in monitor["spec"]["endpoints"]}
    https = endpoints["http"]
    assert https.get("scheme") == "https", https
    tls = https.get("tlsConfig") or {}
    assert tls.get("ca", {}).get("secret") == {"name": "tessera-http-tls", "key": "ca.crt"}, f"https endpoint without the chart's CA: {https}"
    assert tls.get("serverName") in der_dns_names(secret_data(docs, "tessera-http-tls")["tls.crt"]), f"serverName not in the certificate: {tls}"
    assert endpoints["health"].get("scheme", "http") == "http" and "tlsConfig" not in endpoints["health"], endpoints["health"]
    plain = docs_of(render({"metrics": {"serviceMonitor": {"enabled": True}}, "tls": {"http": {"enabled": False}}}))
    (monitor,) = [d for d in plain if d["kind"] == "ServiceMonitor"]
    assert all(e.get("scheme", "http") == "http" and "tlsConfig" not in e for e in monitor["spec"]["endpoints"]), monitor
    own = {"ca": {"secret": {"name": "corp-ca", "key": "root.pem"}}, "serverName": "db.example.com"}
    custom = docs_of(render({"metrics": {"serviceMonitor": {"enabled": True, "tlsConfig": own}}}))
    (monitor,) = [d for d in custom if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == own, monitor["spec"]["endpoints"][0]
    # Defaults.
    sts = sts_of(docs)
    node = containers_of(sts)["node"]
    router_deploy = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "tessera-router"][0]
    router = containers_of(router_deploy)["router"]
    probe = lambda c, kind: {k: v for k, v in c[kind].items() if k != "httpGet"}
    assert probe(node, "startupProbe") == {"periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 120}, node["startupProbe"]
    assert probe(node, "livenessProbe") == {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6}, node["livenessProbe"]
    assert probe(node, "readinessProbe") == {"periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3}, node["readinessProbe"]
    assert probe(router, "startupProbe") == {"periodSeconds": 2, "timeoutSeconds": 5, "failureThreshold": 60}, router["startupProbe"]
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}, sts["spec"]["updateStrategy"]
    for w in (sts, router_deploy):
        assert w["spec"]["template"]["spec"]["securityContext"].get("fsGroupChangePolicy") == "OnRootMismatch", w["metadata"]["name"]
    pdbs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert "tessera-router" in pdbs, f"no router PodDisruptionBudget: {sorted(pdbs)}"
    assert pdbs["tessera-router"]["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": router_deploy["spec"]["selector"]["matchLabels"]}}, pdbs["tessera-router"]
    # Every knob set.
    volume = {"name": "backup", "persistentVolumeClaim": {"claimName": "backup"}}
    mount = {"name": "backup", "mountPath": "/backup"}
    zone = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b", "c"]}]}]}}}
    spread = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "x"}}}]}}
    values = {
        "node": {"priorityClassName": "database-critical", "affinity": zone, "extraVolumes": [volume], "extraVolumeMounts": [mount],
                 "updateStrategy": {"rollingUpdate": {"partition": 2}},
                 "startupProbe": {"periodSeconds": 10, "failureThreshold": 720}, "livenessProbe": {"timeoutSeconds": 8},
                 "readinessProbe": {"periodSeconds": 3, "failureThreshold": 4}},
        "router": {"priorityClassName": "api", "affinity": spread, "extraVolumes": [volume], "extraVolumeMounts": [mount],
                   "podDisruptionBudget": {"maxUnavailable": "50%"}, "livenessProbe": {"failureThreshold": 9}},
        "podSecurityContext": {"fsGroupChangePolicy": "Always"},
    }
    check_values("operations values", values)
    docs = docs_of(render(values))
    sts = sts_of(docs)
    router_deploy = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "tessera-router"][0]
    node, router = containers_of(sts)["node"], containers_of(router_deploy)["router"]
    pod, rpod = sts["spec"]["template"]["spec"], router_deploy["spec"]["template"]["spec"]
    assert (pod.get("priorityClassName"), rpod.get("priorityClassName")) == ("database-critical", "api")
    assert pod["affinity"]["nodeAffinity"] == zone["nodeAffinity"], pod["affinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["podAntiAffinity"], "the chart's anti-affinity kept next to a node affinity"
    assert rpod["affinity"] == spread, f"a given podAntiAffinity replaces the chart's: {rpod['affinity']}"
    for p, c in ((pod, node), (rpod, router)):
        assert volume in p["volumes"] and mount in c["volumeMounts"], (p["volumes"], c["volumeMounts"])
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    assert probe(node, "startupProbe") == {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 720}, node["startupProbe"]
    assert node["startupProbe"]["periodSeconds"] * node["startupProbe"]["failureThreshold"] > 600
    assert node["livenessProbe"]["timeoutSeconds"] == 8 and node["readinessProbe"]["periodSeconds"] == 3 and node["readinessProbe"]["failureThreshold"] == 4
    assert router["livenessProbe"]["failureThreshold"] == 9
    assert pod["securityContext"]["fsGroupChangePolicy"] == "Always" and pod["securityContext"]["runAsUser"] == 10001, pod["securityContext"]
    pdbs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert pdbs["tessera-router"]["spec"]["maxUnavailable"] == "50%"
    off = docs_of(render({"router": {"podDisruptionBudget": {"enabled": False}}}))
    assert "tessera-router" not in {d["metadata"]["name"] for d in off if d["kind"] == "PodDisruptionBudget"}
    # Cross-field rules the schema cannot state.
    for label, bad, needle in [
        ("a preStop wait as long as the grace period", {"node": {"preStopTimeoutSeconds": 60, "terminationGracePeriodSeconds": 60}}, "preStopTimeoutSeconds"),
        ("a heartbeat no shorter than the election timeout", {"cluster": {"raft": {"heartbeatMs": 1000, "electionMinMs": 1000}}}, "heartbeatMs"),
        ("an election timeout range upside down", {"cluster": {"raft": {"electionMinMs": 3000, "electionMaxMs": 2000}}}, "electionMaxMs"),
    ]:
        msg = expect_refusal(label, lambda: render(bad))
        assert needle in msg, (label, msg)
        print(f"ok  refused {label}: {msg.splitlines()[0][:140]}")
    print("ok  operations: ServiceMonitor tlsConfig (chart CA, certificate's server name; overridable), probes, priorityClassName,"
          " affinity, extra volumes, update partition, router PDB, fsGroupChangePolicy from values")


def hook_jobs(docs, component):
    """The Jobs of one component (registration, scale-down) among `docs`."""
    return [d for d in docs if d["kind"] == "Job" and d["metadata"]["labels"].get("app.kubernetes.io/component") == component]


def job_env(job):
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def hooks_of(job):
    return set(job["metadata"]["annotations"].get("helm.sh/hook", "").split(","))


def check_scale_down():
    """Issue item (day two): going from 5 to 4 nodes must not delete pod 4
    while the cluster still counts node 5, and neither may a rollback to a
    revision with fewer nodes. An upgrade that finds (`lookup`) the
    StatefulSet with more replicas than node.replicas renders a
    pre-upgrade,pre-rollback hook Job that drains and removes the members
    above node.replicas (highest first) through the admin API before the
    StatefulSet shrinks; every other render (install, an upgrade that keeps or
    raises node.replicas, a render without the cluster) stores the same Job as
    a pre-rollback hook alone, since `helm rollback` runs the hooks of the
    revision it goes back to."""
    five = {"node": {"replicas": 5, "initialReplicas": 3}}
    (guard,) = hook_jobs(docs_of(render(five)), "scale-down")
    assert hooks_of(guard) == {"pre-rollback"}, f"the install stores no rollback guard: {guard['metadata']['annotations']}"
    assert job_env(guard).get("REPLICAS_AFTER") == "5", job_env(guard)
    with FakeCluster() as cluster:
        cluster.install(five)
        assert cluster.statefulset("tessera-node")["spec"]["replicas"] == 5
        for replicas in (4, 3):
            docs = docs_of(cluster.render_upgrade({"node": {"replicas": replicas, "initialReplicas": 3}}))
            jobs = hook_jobs(docs, "scale-down")
            assert len(jobs) == 1, f"5 -> {replicas} nodes: no scale-down hook Job rendered ({sorted(d['metadata']['name'] for d in docs if d['kind'] == 'Job')})"
            (job,) = jobs
            assert hooks_of(job) == {"pre-upgrade", "pre-rollback"}, job["metadata"]["annotations"]
            env = job_env(job)
            assert env.get("REPLICAS_AFTER") == str(replicas), f"5 -> {replicas}: the Job keeps {env.get('REPLICAS_AFTER')!r} nodes"
            kubernetes_validate.validate(job, KUBE_VERSION, strict=True)
        # The release's manifest (what is applied after the hooks) does not hold it: it is a hook.
        assert not hook_jobs(docs_of(cluster.upgrade({"node": {"replicas": 4, "initialReplicas": 3}})), "scale-down")
        (same,) = hook_jobs(docs_of(cluster.render_upgrade(five)), "scale-down")
        assert hooks_of(same) == {"pre-rollback"}, "5 -> 5 nodes runs a scale-down Job before the upgrade"
    with FakeCluster() as cluster:
        cluster.install({"node": {"replicas": 4, "initialReplicas": 3}})
        (up,) = hook_jobs(docs_of(cluster.render_upgrade(five)), "scale-down")
        assert hooks_of(up) == {"pre-rollback"}, "4 -> 5 nodes runs a scale-down Job before the upgrade"
    # Without the cluster (helm template, --dry-run=client, GitOps): lookup finds nothing, a rollback guard only.
    given = {"auth": {"adminPassword": "Given-Passw0rd!"}, "metrics": {"token": "t"}, "tls": {"allowNewCaOnUpgrade": True}}
    (offline,) = hook_jobs(docs_of(render({**given, "node": {"replicas": 4, "initialReplicas": 3}}, upgrade=True)), "scale-down")
    assert hooks_of(offline) == {"pre-rollback"}, offline["metadata"]["annotations"]
    print("ok  scale-down guard: an upgrade from 5 to 4 (3) nodes that finds the StatefulSet renders a pre-upgrade,pre-rollback"
          " hook Job draining and removing the members above 4 (3); install, 5 -> 5, 4 -> 5 and offline renders store it as a"
          " pre-rollback hook only (a rollback to a revision with fewer nodes drains and removes the extra ones first)")


def members(*ids):
    """A GET /api/v1/admin/nodes answer listing `ids` (active), as the router serializes it."""
    return {"nodes": [{"id": i, "address": f"tessera-node-{i - 1}:9191", "state": "active", "locality": ""} for i in ids], "count": len(ids)}


class FakeAdminApi:
    """The router's admin API as the chart's Jobs use it, on loopback, over
    HTTPS with the given certificate: POST /api/v1/auth/login checks the
    credentials (parsed as JSON) and hands out a token; every other call must
    carry it and is answered from `plan`, {(method, path): [(status, body),
    ...]} in order (the last answer repeats). `calls` records (method, path,
    headers, body) of each."""

    def __init__(self, plan, username, password, cert=None, key=None):
        self.plan = {k: list(v) for k, v in plan.items()}
        self.calls = []
        self.logins = 0
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, code, body):
                data = json.dumps(body, separators=(",", ":")).encode()  # compact, as the router's serde_json
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def serve(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw) if raw.strip() else None
                api.calls.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path == "/api/v1/auth/login":
                    if body == {"username": username, "password": password}:
                        api.logins += 1
                        return self.answer(200, {"token": f"token-{api.logins}"})
                    return self.answer(401, {"error": "invalid credentials", "got": body})
                if self.headers.get("authorization") != f"Bearer token-{api.logins}":
                    return self.answer(401, {"error": "no valid session"})
                queue = api.plan.get((self.command, self.path))
                if not queue:
                    return self.answer(404, {"error": f"{self.command} {self.path} is not planned"})
                code, reply = queue.pop(0) if len(queue) > 1 else queue[0]
                self.answer(code, reply)

            do_GET = do_POST = do_DELETE = serve

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if cert else 'http'}://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def requests(self, method=None):
        return [(m, p) for m, p, _, _ in self.calls if p != "/api/v1/auth/login" and (method is None or m == method)]


# A password no naive JSON template survives: quotes, backslashes, a newline,
# a tab, other control characters, a dollar and non-ASCII.
NASTY_PASSWORD = 'p"a\\ss\nw\to\x01r\x1fd $(x) `y` %s é €'
NASTY_USERNAME = 'ad"m\\in'


def run_job(job, url, tmp, env=None, ca_file=None, timeout=60):
    """Runs the rendered Job's script with this machine's sh and curl, as its
    pod would: its plain env values, the Secret-held credentials given here,
    TESSERA_URL pointing at `url`. Answers (exit status, output)."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["/bin/sh", "-c"], container["command"]
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp}
    for e in container["env"]:
        if "value" in e:
            run_env[e["name"]] = e["value"]
    run_env.update({"TESSERA_URL": url, "TMPDIR": tmp, "RETRY_SECONDS": "0.05",
                    "ADMIN_USERNAME": NASTY_USERNAME, "ADMIN_PASSWORD": NASTY_PASSWORD})
    run_env.pop("TESSERA_CA_FILE", None)
    if ca_file:
        assert "TESSERA_CA_FILE" in {e["name"] for e in container["env"]}, "the Job passes no CA file"
        run_env["TESSERA_CA_FILE"] = ca_file
    run_env.update(env or {})
    out = subprocess.run(["/bin/sh", "-c", container["command"][2]], env=run_env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def check_admin_jobs():
    """Issue items A and B, the admin-API Jobs: the registration Job (post-
    install/upgrade/rollback) records each new node with X-Consistency: one
    and returns (the placement driver moves the data), accepts a node that is
    a member already in any state (warns for draining/removing), retries only
    while a node does not answer yet or another membership change is under
    way, bounded; the scale-down Job drains (X-Consistency: all) and removes
    each departing node, 404 meaning done. Both: JSON built safely for any
    password, TLS verified against the chart's CA (only ca.crt mounted, curl
    --cacert, never -k), connect and total timeouts on every call, an active
    deadline, a TTL, resources, and no hook-succeeded (logs stay). The
    scripts run here with sh and curl against a fake admin API over HTTPS
    with the chart's router certificate."""
    seven = {"node": {"replicas": 7, "initialReplicas": 3}}
    docs = docs_of(render(seven))
    (job,) = hook_jobs(docs, "registration")
    meta, spec = job["metadata"]["annotations"], job["spec"]
    assert set(meta["helm.sh/hook"].split(",")) == {"post-install", "post-upgrade", "post-rollback"}, meta
    assert meta["helm.sh/hook-delete-policy"] == "before-hook-creation", f"a finished Job must stay for its logs: {meta}"
    assert (spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (1800, 86400), spec
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}, container["resources"]
    script = container["command"][2]
    for needle in ("--cacert", "--max-time", "--connect-timeout", "x-consistency: one", "json_string"):
        assert needle in script, f"registration script without {needle}"
    assert not re.search(r"curl[^\n]*\s(-k|--insecure)\b", script) and " -k" not in script, "curl -k: TLS not verified"
    assert script.count("| curl ") == 1 and script.count("curl -") == 2, "every call goes through call() (timeouts, CA, token file)"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["router-ca"]["secret"]["secretName"] == "tessera-http-tls", volumes
    assert volumes["router-ca"]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}], "only the CA, not the router's key"
    env = job_env(job)
    assert env["TESSERA_CA_FILE"] == "/etc/tessera/router-ca/ca.crt" and env["TESSERA_URL"].startswith("https://tessera-router.default.svc."), env
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["router-ca"] == {"name": "router-ca", "mountPath": "/etc/tessera/router-ca", "readOnly": True}, mounts
    # Values reach the Job; cert-manager's Secret, plain HTTP, a CA of one's own.
    tuned = {**seven, "registration": {"activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 3600, "requestTimeoutSeconds": 12,
                                       "resources": {"limits": {"memory": "32Mi"}}}}
    (tj,) = hook_jobs(docs_of(render(tuned)), "registration")
    assert (tj["spec"]["activeDeadlineSeconds"], tj["spec"]["ttlSecondsAfterFinished"], job_env(tj)["REQUEST_TIMEOUT_SECONDS"]) == (600, 3600, "12")
    assert tj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"memory": "32Mi"}
    (pj,) = hook_jobs(docs_of(render({**seven, "tls": {"http": {"enabled": False}}})), "registration")
    assert "TESSERA_CA_FILE" not in job_env(pj) and job_env(pj)["TESSERA_URL"].startswith("http://"), job_env(pj)
    assert "router-ca" not in {v["name"] for v in pj["spec"]["template"]["spec"]["volumes"]}
    (oj,) = hook_jobs(docs_of(render({**seven, "registration": {"url": "https://db.example.com", "routerCa": {"existingSecret": "corp-ca", "key": "root.pem"}}})), "registration")
    assert [v["secret"] for v in oj["spec"]["template"]["spec"]["volumes"] if v["name"] == "router-ca"] == [
        {"secretName": "corp-ca", "defaultMode": 0o444, "items": [{"key": "root.pem", "path": "ca.crt"}]}]
    msg = expect_refusal("a registration CA for a plain-HTTP router",
                         lambda: render({**seven, "registration": {"url": "http://db:9090", "routerCa": {"existingSecret": "ca"}}}))
    assert "registration.routerCa" in msg, msg

    with tempfile.TemporaryDirectory() as tmp:
        # The rendered router certificate (127.0.0.1 among its names) and its CA.
        data = secret_data(docs, "tessera-http-tls")
        files = {}
        for key in ("tls.crt", "tls.key", "ca.crt"):
            files[key] = os.path.join(tmp, key)
            pathlib.Path(files[key]).write_bytes(base64.b64decode(data[key]))
        other_ca = os.path.join(tmp, "other-ca.crt")
        pathlib.Path(other_ca).write_bytes(base64.b64decode(secret_data(docs_of(render({})), "tessera-http-tls")["ca.crt"]))
        tls = dict(cert=files["tls.crt"], key=files["tls.key"])
        nodes = {"nodes": [{"id": 4, "address": "a:1", "state": "joining"}, {"id": 5, "address": "b:1", "state": "draining"}]}
        joining = lambda n: (202, {"node_id": n, "state": "joining", "added": False})
        member = lambda n, state: (409, {"error": f"node {n} is already in the cluster ({state})"})
        plan = {
            ("POST", "/api/v1/admin/nodes"): [
                (409, {"error": "node 4 does not answer at a:1: start it first with SERVICE_INITIAL_CLUSTER_STATE=existing"}),
                (503, {"error": "the cluster map is not known yet"}),
                joining(4),
                (409, {"error": "node 4 is joining: one membership change at a time"}),
                member(5, "draining"),
                member(6, "active"),
                (401, {"error": "session expired"}),
                member(7, "removing"),
            ],
            ("GET", "/api/v1/admin/nodes"): [(200, nodes)],
        }
        with FakeAdminApi(plan, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(job, api.url, tmp, ca_file=files["ca.crt"])
            assert status == 0, out
            for needle in ("node 4 added", "WARNING: node 5 is a member already but draining", "node 6 is a member already (active)",
                           "WARNING: node 7 is a member already but removing", "node 4 (a:1): joining", "GET /api/v1/admin/nodes"):
                assert needle in out, (needle, out)
            posts = [(c[2].get("x-consistency"), c[3]) for c in api.calls if c[:2] == ("POST", "/api/v1/admin/nodes")]
            assert all(x == "one" for x, _ in posts), posts
            hosts = {i: f"tessera-node-{i - 1}.tessera-node-headless.default.svc.cluster.local:9191" for i in range(4, 8)}
            assert [b for _, b in posts] == [{"node_id": i, "address": hosts[i]} for i in (4, 4, 4, 5, 5, 6, 7, 7)], posts
            assert api.logins == 2, "signed in again after the 401"
            assert not any("token-" in " ".join(c[0:2]) for c in api.calls)
        # Permanent refusals fail at once; a node that never answers fails at the deadline.
        for reply, env, needle in [
            ((409, {"error": "the node at a:1 is node 9, not node 4"}), {}, "node 4 (tessera-node-3"),
            ((409, {"error": "node 4 does not answer at a:1"}), {"TIMEOUT_SECONDS": "1"}, "was not added within 1s"),
            ((400, {"error": "address is not of the form host:port"}), {}, "was not added: 400"),
        ]:
            with FakeAdminApi({("POST", "/api/v1/admin/nodes"): [reply]}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
                started = time.monotonic()
                status, out = run_job(job, api.url, tmp, env=env, ca_file=files["ca.crt"])
                assert status != 0 and needle in out, (reply, out)
                assert time.monotonic() - started < 10, f"{reply} took {time.monotonic() - started:.0f}s"
        # TLS is verified: a router certificate of another CA is never trusted.
        with FakeAdminApi({}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(job, api.url, tmp, env={"TIMEOUT_SECONDS": "1"}, ca_file=other_ca)
            assert status != 0 and api.calls == [] and "SSL" in out.upper() + "", out

        # The scale-down Job, rendered by an upgrade that finds 7 pods, going to 4.
        with FakeCluster() as cluster:
            cluster.install(seven)
            up = docs_of(cluster.render_upgrade({"node": {"replicas": 4, "initialReplicas": 3}}))
        (down,) = hook_jobs(up, "scale-down")
        meta, spec = down["metadata"]["annotations"], down["spec"]
        assert meta["helm.sh/hook-delete-policy"] == "before-hook-creation", meta
        assert (spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (3600, 86400), spec
        assert job_env(down)["REPLICAS_AFTER"] == "4", job_env(down)
        dscript = down["spec"]["template"]["spec"]["containers"][0]["command"][2]
        assert "x-consistency: all" in dscript and " -k" not in dscript and dscript.count("curl ") == 1 and "| curl " in dscript
        assert [v for v in down["spec"]["template"]["spec"]["volumes"] if v["name"] == "router-ca"] == [v for v in pod["volumes"] if v["name"] == "router-ca"]
        node = "/api/v1/admin/nodes/{}"
        plan = {
            ("POST", node.format(7) + "/drain"): [(504, {"error": "drain of node 7: no progress for 60s"}), (200, {"drained": True})],
            ("DELETE", node.format(7)): [(409, {"error": "node 7 still leads groups [3]: wait until its drain finished"}), (200, {"removed": True})],
            ("POST", node.format(6) + "/drain"): [(409, {"error": "node 7 is removing: one node leaves at a time (remove it first)"}), (404, {"error": "node 6 does not exist"})],
            ("POST", node.format(5) + "/drain"): [(409, {"error": "node 5 is being removed"})],
            ("DELETE", node.format(5)): [(404, {"error": "node 5 does not exist"})],
            ("GET", "/api/v1/admin/nodes"): [(503, {"error": "no meta leader"}), (200, members(1, 2, 3, 4, 5, 6, 7)), (200, nodes)],
        }
        with FakeAdminApi(plan, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(down, api.url, tmp, ca_file=files["ca.crt"])
            assert status == 0, out
            assert api.requests() == [("GET", "/api/v1/admin/nodes")] * 2 + [("POST", node.format(7) + "/drain")] * 2 + [("DELETE", node.format(7))] * 2 + [
                ("POST", node.format(6) + "/drain")] * 2 + [("POST", node.format(5) + "/drain"), ("DELETE", node.format(5)), ("GET", "/api/v1/admin/nodes")], api.requests()
            levels = {(c[0], c[2].get("x-consistency")) for c in api.calls if c[0] != "GET" and c[1] != "/api/v1/auth/login"}
            assert levels == {("POST", "all"), ("DELETE", "quorum")}, levels
            assert "node 7 removed" in out and "node 6 is not a member" in out, out
        for reply, needle in [((409, {"error": "node 7 holds the last replica of group 2"}), "node 7 could not be removed: 409"),
                              ((403, {"error": "missing manage:cluster"}), "node 7 could not be removed: 403")]:
            plan = {("POST", node.format(7) + "/drain"): [(200, {})], ("DELETE", node.format(7)): [reply],
                    ("GET", "/api/v1/admin/nodes"): [(200, members(1, 2, 3, 4, 5, 6, 7))]}
            with FakeAdminApi(plan, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
                status, out = run_job(down, api.url, tmp, ca_file=files["ca.crt"])
                assert status != 0 and needle in out and ("POST", node.format(6) + "/drain") not in api.requests(), out
        with FakeAdminApi({("POST", node.format(7) + "/drain"): [(504, {"error": "no progress"})],
                           ("GET", "/api/v1/admin/nodes"): [(200, members(1, 2, 3, 4, 5, 6, 7))]}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(down, api.url, tmp, env={"TIMEOUT_SECONDS": "1"}, ca_file=files["ca.crt"])
            assert status != 0 and "not drained within 1s" in out and not api.requests("DELETE"), out
        # A rollback to a revision of 4 nodes: the members above 4 leave; none when there are none.
        with FakeAdminApi({("GET", "/api/v1/admin/nodes"): [(200, members(1, 2, 3, 5))], ("POST", node.format(5) + "/drain"): [(200, {})],
                           ("DELETE", node.format(5)): [(200, {})]}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(down, api.url, tmp, ca_file=files["ca.crt"])
            assert status == 0 and api.requests("POST") == [("POST", node.format(5) + "/drain")] and api.requests("DELETE") == [("DELETE", node.format(5))], out
        with FakeAdminApi({("GET", "/api/v1/admin/nodes"): [(200, members(1, 2, 3, 4))]}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(down, api.url, tmp, ca_file=files["ca.crt"])
            assert status == 0 and "no member above node 4" in out and api.requests() == [("GET", "/api/v1/admin/nodes")], out
        for reply in [(403, {"error": "missing manage:cluster"})]:
            with FakeAdminApi({("GET", "/api/v1/admin/nodes"): [reply]}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
                status, out = run_job(down, api.url, tmp, ca_file=files["ca.crt"])
                assert status != 0 and "the members could not be listed: 403" in out, out
        with FakeAdminApi({("GET", "/api/v1/admin/nodes"): [(503, {"error": "no meta leader"})]}, NASTY_USERNAME, NASTY_PASSWORD, **tls) as api:
            status, out = run_job(down, api.url, tmp, env={"TIMEOUT_SECONDS": "1"}, ca_file=files["ca.crt"])
            assert status != 0 and "could not be listed within 1s" in out and not api.requests("POST"), out
    print("ok  admin-API Jobs: registration (X-Consistency: one; members in any state accepted, draining/removing warned;"
          " retried only while a node does not answer or another change runs, bounded) and scale-down (drain with"
          " X-Consistency: all, remove, 404 = done, highest first, stops at the first failure) run against a fake admin API"
          " over HTTPS: JSON bodies valid for any password, TLS verified against the chart's CA only (ca.crt mounted alone,"
          " another CA refused), timeouts, deadline, TTL, resources; no hook-succeeded")


def check_locality():
    """Issue item C: SERVICE_LOCALITY = zone=$(TESSERA_ZONE), TESSERA_ZONE
    from the pod's topology.kubernetes.io/zone label (downward API), static
    tiers from node.locality.extra (a region first), nothing when both are
    off; SERVICE_REJOIN_WHEN_REMOVED=true; the pod template still the same
    for any node.replicas."""
    def env_of(values):
        (c,) = sts_of(docs_of(render(values)))["spec"]["template"]["spec"]["containers"]
        return [e["name"] for e in c["env"]], {e["name"]: e for e in c["env"]}
    names, env = env_of({})
    assert env["TESSERA_ZONE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['topology.kubernetes.io/zone']"}}, env["TESSERA_ZONE"]
    assert env["SERVICE_LOCALITY"]["value"] == "zone=$(TESSERA_ZONE)", env["SERVICE_LOCALITY"]
    assert names.index("TESSERA_ZONE") < names.index("SERVICE_LOCALITY"), "$(TESSERA_ZONE) expands only from an earlier variable"
    assert env["SERVICE_REJOIN_WHEN_REMOVED"]["value"] == "true"
    _, env = env_of({"node": {"locality": {"extra": "rack=r1,region=eu"}}})
    assert env["SERVICE_LOCALITY"]["value"] == "region=eu,zone=$(TESSERA_ZONE),rack=r1", env["SERVICE_LOCALITY"]
    names, env = env_of({"node": {"locality": {"zoneFromTopologyLabel": False, "extra": "rack=r1"}}})
    assert env["SERVICE_LOCALITY"]["value"] == "rack=r1" and "TESSERA_ZONE" not in env, env.get("SERVICE_LOCALITY")
    names, env = env_of({"node": {"locality": {"zoneFromTopologyLabel": False}}})
    assert "SERVICE_LOCALITY" not in env and "TESSERA_ZONE" not in env
    msg = expect_refusal("a zone tier in node.locality.extra next to the topology label's", lambda: render({"node": {"locality": {"extra": "zone=a"}}}))
    assert "zoneFromTopologyLabel" in msg, msg
    expect_refusal("a malformed locality tier", lambda: render({"node": {"locality": {"extra": "region eu"}}}))
    values = {"node": {"locality": {"extra": "region=eu"}}}
    a = sts_of(docs_of(render({**values, "node": {**values["node"], "replicas": 3}})))["spec"]["template"]
    b = sts_of(docs_of(render({**values, "node": {**values["node"], "replicas": 6}})))["spec"]["template"]
    assert a == b, f"node.replicas changes the pod template:\n{diff(a, b)}"
    print("ok  locality: SERVICE_LOCALITY=zone=$(TESSERA_ZONE) from the pod's topology.kubernetes.io/zone label (downward API),"
          " node.locality.extra tiers (region first), none when off; SERVICE_REJOIN_WHEN_REMOVED=true; pod template independent of node.replicas")


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
    check_secrets_on_upgrade()
    check_scale_down()
    check_admin_jobs()
    check_locality()
    check_no_needless_restarts()
    check_name_lengths()
    check_operations()
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
    r.add_argument("--upgrade", action="store_true", help="render an upgrade on which lookup finds nothing")
    r.add_argument("--existing-replicas", type=int, help="render the upgrade of a release installed with node.replicas=R (lookup finds it)")
    args = parser.parse_args()
    if args.command == "check":
        check()
        return
    values = {}
    for f in args.values:
        deep_merge(values, yaml.safe_load(pathlib.Path(f).read_text()) or {})
    for j in args.set_json:
        deep_merge(values, json.loads(j))
    if args.existing_replicas is not None:
        installed = json.loads(json.dumps(values))
        installed.setdefault("node", {})["replicas"] = args.existing_replicas
        installed["node"].pop("peerHosts", None)  # one per replica: not the upgrade's
        with FakeCluster(args.namespace) as cluster:
            cluster.install(installed, args.name)
            json.dump(cluster.render_upgrade(values, args.name), sys.stdout)
        return
    json.dump(render(values, args.name, args.namespace, upgrade=args.upgrade), sys.stdout)


if __name__ == "__main__":
    main()
