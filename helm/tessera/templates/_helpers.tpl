{{/* The chart's name. */}}
{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's full name (objects are named after it): fullnameOverride, or
<release>-<chart> (<release> alone when it holds the chart's name). At most
47 characters, so that the StatefulSet <fullname>-node (52) leaves room for its
pods' controller-revision-hash label (<statefulset>-<10 characters>, a label
value: at most 63). A longer derived name keeps its first 41 characters and
ends in 5 characters of its SHA-256 (two long release names never share
objects); a longer fullnameOverride is refused.
*/}}
{{- define "tessera.fullname" -}}
{{- $max := 47 -}}
{{- if .Values.fullnameOverride -}}
{{- $name := .Values.fullnameOverride | trimSuffix "-" -}}
{{- if gt (len $name) $max -}}
{{- fail (printf "fullnameOverride %q is %d characters; at most %d fit: the StatefulSet <fullname>-node (at most 52) must leave room for its pods' controller-revision-hash label (<statefulset>-<10 characters>, at most 63). See helm/tessera/README.md, \"Name limits\"" $name (len $name) $max) -}}
{{- end -}}
{{- $name -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- $full := ternary .Release.Name (printf "%s-%s" .Release.Name $name) (contains $name .Release.Name) -}}
{{- if gt (len $full) $max -}}
{{- $full = printf "%s-%s" (trunc (int (sub $max 6)) $full | trimSuffix "-") (sha256sum $full | trunc 5) -}}
{{- end -}}
{{- $full -}}
{{- end -}}
{{- end -}}

{{/*
<fullname><suffix>, at most 63 characters (a DNS label: Service names, label
values, host names): a full name too long for the suffix keeps what fits and
ends in 5 characters of its SHA-256. Pass (list $ "-suffix").
*/}}
{{- define "tessera.suffixed" -}}
{{- $ := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $full := include "tessera.fullname" $ -}}
{{- $room := int (sub 63 (len $suffix)) -}}
{{- if gt (len $full) $room -}}
{{- $full = printf "%s-%s" (trunc (int (sub $room 6)) $full | trimSuffix "-") (sha256sum $full | trunc 5) -}}
{{- end -}}
{{- printf "%s%s" $full $suffix -}}
{{- end -}}

{{- define "tessera.nodeName" -}}{{ include "tessera.suffixed" (list . "-node") }}{{- end -}}
{{- define "tessera.headlessName" -}}{{ include "tessera.suffixed" (list . "-node-headless") }}{{- end -}}
{{- define "tessera.routerName" -}}{{ include "tessera.suffixed" (list . "-router") }}{{- end -}}
{{- define "tessera.configName" -}}{{ include "tessera.suffixed" (list . "-config") }}{{- end -}}
{{- define "tessera.secretName" -}}{{ include "tessera.suffixed" (list . "-secrets") }}{{- end -}}
{{- define "tessera.registrationName" -}}{{ include "tessera.suffixed" (list . "-register-nodes") }}{{- end -}}

{{- define "tessera.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tessera.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tessera.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object's metadata (not of pod templates: tessera.podLabels). */}}
{{- define "tessera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
Labels of a component's pod template: its selector labels and the version of
the binaries. Not helm.sh/chart: a new chart version alone must not roll the
pods (a StatefulSet rolls on any change of its pod template). Pass (list $ "node").
*/}}
{{- define "tessera.podLabels" -}}
{{- $ := index . 0 -}}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
{{- end -}}

{{/* Selector labels of one component (node or router): pass (list $ "node"). */}}
{{- define "tessera.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "tessera.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
The first n nodes as `id=host:port`, id = ordinal + 1, host = the pod's stable
DNS name under the headless Service (or node.peerHosts[ordinal]). Pass (list $ n).
*/}}
{{- define "tessera.peerList" -}}
{{- $ := index . 0 -}}
{{- $n := int (index . 1) -}}
{{- $replicas := int $.Values.node.replicas -}}
{{- if and $.Values.node.peerHosts (ne (len $.Values.node.peerHosts) $replicas) -}}
{{- fail (printf "node.peerHosts names %d hosts for %d node replicas" (len $.Values.node.peerHosts) $replicas) -}}
{{- end -}}
{{- $peers := list -}}
{{- range $i := until $n -}}
{{- $host := printf "%s-%d.%s.%s.svc.%s" (include "tessera.nodeName" $) $i (include "tessera.headlessName" $) $.Release.Namespace $.Values.clusterDomain -}}
{{- if $.Values.node.peerHosts -}}{{- $host = index $.Values.node.peerHosts $i -}}{{- end -}}
{{- $peers = append $peers (printf "%d=%s:%d" (add1 $i) $host (int $.Values.node.ports.grpc)) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{/* Every node (node.replicas of them) as `id=host:port`: the routers' and the registration Job's list. */}}
{{- define "tessera.peers" -}}
{{- include "tessera.peerList" (list . .Values.node.replicas) -}}
{{- end -}}

{{/*
The address a node pod advertises for itself (SERVICE_ADVERTISE_ADDR), built
by Kubernetes from the pod's own variables ($(VAR) expansion), so that the pod
template is the same for every pod and every node.replicas: its stable DNS
name $(POD_NAME).<headless>.<ns>.svc.<clusterDomain>, or with node.peerHosts
(which the pod cannot index) its pod IP. The node uses it only when its id is
not among SERVICE_PEERS (the bootstrap nodes): a pod added later.
*/}}
{{- define "tessera.advertiseAddr" -}}
{{- if .Values.node.peerHosts -}}
{{- printf "%s:%d" (ternary "[$(POD_IP)]" "$(POD_IP)" (hasPrefix "[" .Values.node.listenHost)) (int .Values.node.ports.grpc) -}}
{{- else -}}
{{- printf "$(POD_NAME).%s.%s.svc.%s:%d" (include "tessera.headlessName" .) .Release.Namespace .Values.clusterDomain (int .Values.node.ports.grpc) -}}
{{- end -}}
{{- end -}}

{{/*
A component's affinity: the chart's pod anti-affinity (node.podAntiAffinity
soft/hard, see tessera.antiAffinity), with each key of the given affinity
(nodeAffinity, podAffinity, podAntiAffinity) added or, for podAntiAffinity,
replacing the chart's. Pass (list $ "node" mode affinity); YAML or nothing.
*/}}
{{- define "tessera.affinity" -}}
{{- $affinity := include "tessera.antiAffinity" (list (index . 0) (index . 1) (index . 2)) | fromYaml | default dict -}}
{{- range $key, $value := (index . 3) -}}
{{- $_ := set $affinity $key $value -}}
{{- end -}}
{{- with $affinity -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
The nodes' configuration file (node.toml of the ConfigMap). Its hash is the
StatefulSet's checksum/config: only a change of it rolls the nodes. Refuses
Raft timings out of order (the schema cannot compare fields).
*/}}
{{- define "tessera.nodeToml" -}}
{{- $raft := .Values.cluster.raft -}}
{{- if not (lt (int $raft.heartbeatMs) (int $raft.electionMinMs)) -}}
{{- fail (printf "cluster.raft.heartbeatMs (%d) must be below cluster.raft.electionMinMs (%d): followers that miss no heartbeat must not start elections (the nodes refuse heartbeat >= election_min)" (int $raft.heartbeatMs) (int $raft.electionMinMs)) -}}
{{- end -}}
{{- if not (lt (int $raft.electionMinMs) (int $raft.electionMaxMs)) -}}
{{- fail (printf "cluster.raft.electionMinMs (%d) must be below cluster.raft.electionMaxMs (%d): election timeouts are drawn from that range (the nodes refuse election_min >= election_max)" (int $raft.electionMinMs) (int $raft.electionMaxMs)) -}}
{{- end -}}
log_level = {{ .Values.node.logLevel | quote }}
log_format = {{ .Values.node.logFormat | quote }}

[cluster]
name = {{ .Values.cluster.name | quote }}
max_clock_offset_ms = {{ int .Values.cluster.maxClockOffsetMs }}

[server]
query_workers = {{ int .Values.node.queryWorkers }}
sql_memory_pool_mb = {{ int .Values.node.sqlMemoryPoolMb }}

[sharding]
strategy = {{ .Values.cluster.shardingStrategy | quote }}
shard_count = {{ int .Values.cluster.shardCount }}

[replication]
replication_factor = {{ int .Values.cluster.replicationFactor }}

[raft]
heartbeat_ms = {{ int $raft.heartbeatMs }}
election_min_ms = {{ int $raft.electionMinMs }}
election_max_ms = {{ int $raft.electionMaxMs }}
snapshot_logs = {{ int $raft.snapshotLogs }}
keep_logs = {{ int $raft.keepLogs }}
{{- end -}}

{{/* The routers' configuration file (router.toml); its hash is the router Deployment's checksum/config. */}}
{{- define "tessera.routerToml" -}}
log_level = {{ .Values.router.logLevel | quote }}
log_format = {{ .Values.router.logFormat | quote }}

[replication]
replication_factor = {{ int .Values.cluster.replicationFactor }}
{{- end -}}

{{/*
Refuses an upgrade on which generated secrets could not be read. Pass
(list $ secretName missing), missing a list of (list value key) pairs: the
value that sets it and its key in the Secret.
*/}}
{{- define "tessera.failUnreadSecrets" -}}
{{- $ := index . 0 -}}
{{- $secret := index . 1 -}}
{{- $commands := list -}}
{{- $keys := list -}}
{{- range $m := index . 2 -}}
{{- $keys = append $keys (index $m 1) -}}
{{- $commands = append $commands (printf "  --set-string %s=\"$(kubectl -n %s get secret %s -o jsonpath='{.data.%s}' | base64 -d)\"" (index $m 0) $.Release.Namespace $secret (index $m 1)) -}}
{{- end -}}
{{- fail (printf "this upgrade cannot read the Secret %s/%s that holds the generated %s (lookup finds nothing: helm template --is-upgrade, helm upgrade --dry-run=client and GitOps tools render without the cluster; or the Secret was deleted). A new random value would not be the one the release runs with (the routers create the admin only once; scrapers and signed tokens hold the old values). Pass the current values:\n%s\nor keep them in a Secret of your own (the existingSecret values), or render with the cluster (helm upgrade, or --dry-run=server). See helm/tessera/README.md, \"Secrets on upgrade\"" $.Release.Namespace $secret (join ", " $keys) (join "\n" $commands)) -}}
{{- end -}}

{{/* Pod anti-affinity of one component: pass (list $ "node" "soft"). */}}
{{- define "tessera.antiAffinity" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- $mode := index . 2 -}}
{{- if eq $mode "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "tessera.selectorLabels" (list $ $component) | nindent 12 }}
{{- else if eq $mode "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "tessera.selectorLabels" (list $ $component) | nindent 10 }}
{{- end }}
{{- end -}}

{{/* Topology spread constraints with the component's selector filled in. */}}
{{- define "tessera.topologySpread" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- $constraints := index . 2 -}}
{{- range $constraints }}
- {{- $c := deepCopy . }}
  {{- if not (hasKey $c "labelSelector") }}
  {{- $_ := set $c "labelSelector" (dict "matchLabels" (include "tessera.selectorLabels" (list $ $component) | fromYaml)) }}
  {{- end }}
  {{- toYaml $c | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Name of the Secret holding the admin credentials. */}}
{{- define "tessera.authSecret" -}}
{{- default (include "tessera.secretName" .) .Values.auth.existingSecret -}}
{{- end -}}

{{/* Name of the Secret holding the encryption key. */}}
{{- define "tessera.encryptionSecret" -}}
{{- default (include "tessera.secretName" .) .Values.encryption.existingSecret -}}
{{- end -}}

{{/* The Secrets holding the nodes' and the routers' cluster certificates. */}}
{{- define "tessera.nodeTlsSecret" -}}
{{- default (include "tessera.suffixed" (list . "-cluster-tls-node")) .Values.tls.cluster.existingSecret -}}
{{- end -}}
{{- define "tessera.routerTlsSecret" -}}
{{- default (include "tessera.suffixed" (list . "-cluster-tls-router")) .Values.tls.cluster.existingRouterSecret -}}
{{- end -}}

{{/* The Secret holding the routers' HTTPS certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "tessera.httpTlsSecret" -}}
{{- default (include "tessera.suffixed" (list . "-http-tls")) .Values.tls.http.existingSecret -}}
{{- end -}}

{{/* The Secret holding the cluster CA's certificate and key (chart-made certificates only). */}}
{{- define "tessera.caSecret" -}}{{ include "tessera.suffixed" (list . "-cluster-ca") }}{{- end -}}

{{/* The host names of the router Service (the HTTPS certificate's DNS names). */}}
{{- define "tessera.routerHosts" -}}
{{- $svc := include "tessera.routerName" . -}}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.%s" $svc .Release.Namespace .Values.clusterDomain) "localhost" | toJson -}}
{{- end -}}

{{/* Name of the Secret holding the metrics token (key metrics-token). */}}
{{- define "tessera.metricsSecret" -}}
{{- default (include "tessera.secretName" .) .Values.metrics.existingSecret -}}
{{- end -}}

{{/* The meetings application (tessera-meetings): its objects' name and image. */}}
{{- define "tessera.meetingsName" -}}{{ include "tessera.suffixed" (list . "-meetings") }}{{- end -}}
{{- define "tessera.meetingsImage" -}}
{{- $image := .Values.meetings.image -}}
{{- printf "%s:%s" (default .Values.image.repository $image.repository) (default (default .Chart.AppVersion .Values.image.tag) $image.tag) -}}
{{- end -}}

{{/* The Secret holding the Tessera user tessera-meetings signs in as: by default the admin credentials' (no copy). */}}
{{- define "tessera.meetingsCredentialsSecret" -}}
{{- default (include "tessera.authSecret" .) .Values.meetings.credentials.existingSecret -}}
{{- end -}}

{{/* The Secrets holding tessera-meetings' JWT secret (key jwt-secret) and mail service key (key email-api-key). */}}
{{- define "tessera.meetingsJwtSecret" -}}
{{- default (include "tessera.meetingsName" .) .Values.meetings.jwtSecret.existingSecret -}}
{{- end -}}
{{- define "tessera.meetingsEmailSecret" -}}
{{- default (include "tessera.meetingsName" .) .Values.meetings.emailApiKey.existingSecret -}}
{{- end -}}

{{/*
The router tessera-meetings calls, as scheme://host:port (tessera:// plain
HTTP, tesseras:// HTTPS; the application's DATABASE_URL schemes):
meetings.routerUrl, or the chart's router Service by its in-cluster DNS name
<router>.<namespace>.svc.<clusterDomain> and port, over HTTPS when the routers
serve it (tls.http.enabled; the HTTPS certificate names that host, see
tessera.routerHosts, and its CA is mounted: tessera.meetingsRouterCa). A
routerUrl without a port gets its scheme's: 80 (http), 443 (https,
tesseras), 9090 (tessera, the router's).
*/}}
{{- define "tessera.meetingsRouter" -}}
{{- $m := .Values.meetings -}}
{{- $url := "" -}}
{{- if $m.routerUrl -}}
{{- $u := urlParse $m.routerUrl -}}
{{- $scheme := get (dict "http" "tessera" "https" "tesseras" "tessera" "tessera" "tesseras" "tesseras") $u.scheme -}}
{{- if or (not $scheme) (not $u.hostname) (hasSuffix ":" $u.host) (not (has $u.path (list "" "/"))) $u.userinfo $u.query $u.fragment $u.opaque -}}
{{- fail (printf "meetings.routerUrl %q: give scheme://host[:port] (tessera, tesseras, http or https), no user, path or query" $m.routerUrl) -}}
{{- end -}}
{{- $host := $u.host -}}
{{- if not (regexMatch ":[0-9]+$" $host) -}}
{{- $host = printf "%s:%d" $host (int (get (dict "http" 80 "https" 443 "tessera" 9090 "tesseras" 443) $u.scheme)) -}}
{{- end -}}
{{- $url = printf "%s://%s" $scheme $host -}}
{{- else -}}
{{- $url = printf "%s://%s.%s.svc.%s:%d" (ternary "tesseras" "tessera" .Values.tls.http.enabled) (include "tessera.routerName" .) .Release.Namespace .Values.clusterDomain (int .Values.router.service.port) -}}
{{- end -}}
{{- if and $m.routerCa.existingSecret (hasPrefix "tessera://" $url) -}}
{{- fail (printf "meetings.routerCa names a CA (Secret %q) but tessera-meetings calls the router in plain HTTP (%s): give an https:// meetings.routerUrl, or turn tls.http.enabled on, or drop meetings.routerCa" $m.routerCa.existingSecret $url) -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{/*
The CA tessera-meetings trusts for the router's HTTPS certificate besides the
public roots, as JSON {"secret": name, "key": key}, or nothing (public roots
only): meetings.routerCa; else, with the chart's router over HTTPS, ca.crt of
the routers' HTTPS certificate Secret (the chart's, cert-manager's, or
tls.http.existingSecret, which must then hold ca.crt).
*/}}
{{- define "tessera.meetingsRouterCa" -}}
{{- $m := .Values.meetings -}}
{{- if $m.routerCa.existingSecret -}}
{{- dict "secret" $m.routerCa.existingSecret "key" $m.routerCa.key | toJson -}}
{{- else if and (not $m.routerUrl) .Values.tls.http.enabled -}}
{{- dict "secret" (include "tessera.httpTlsSecret" .) "key" "ca.crt" | toJson -}}
{{- end -}}
{{- end -}}

{{- define "tessera.scaleDownName" -}}{{ include "tessera.suffixed" (list . "-scale-down") }}{{- end -}}

{{/*
The router URL the chart's admin-API Jobs (registration, scale-down) call:
registration.url, or the chart's router Service by its in-cluster DNS name
(a name the routers' HTTPS certificate carries) and port.
*/}}
{{- define "tessera.adminApiUrl" -}}
{{- default (printf "%s://%s.%s.svc.%s:%d" (ternary "https" "http" .Values.tls.http.enabled) (include "tessera.routerName" .) .Release.Namespace .Values.clusterDomain (int .Values.router.service.port)) .Values.registration.url -}}
{{- end -}}

{{/*
The CA the admin-API Jobs verify the router's HTTPS certificate with (curl
--cacert: that CA alone), as JSON {"secret": name, "key": key}, or nothing
(plain HTTP; or an https registration.url with the system's public roots):
registration.routerCa, else ca.crt of the routers' HTTPS certificate Secret
(the chart's, cert-manager's, or tls.http.existingSecret's) when the routers
serve HTTPS. Refuses a CA for a plain-HTTP URL.
*/}}
{{- define "tessera.adminApiCa" -}}
{{- $r := .Values.registration -}}
{{- $url := include "tessera.adminApiUrl" . -}}
{{- if $r.routerCa.existingSecret -}}
{{- if not (hasPrefix "https://" $url) -}}
{{- fail (printf "registration.routerCa names a CA (Secret %q) but the chart's Jobs call the router in plain HTTP (%s): give an https:// registration.url, or turn tls.http.enabled on, or drop registration.routerCa" $r.routerCa.existingSecret $url) -}}
{{- end -}}
{{- dict "secret" $r.routerCa.existingSecret "key" $r.routerCa.key | toJson -}}
{{- else if and .Values.tls.http.enabled (hasPrefix "https://" $url) -}}
{{- dict "secret" (include "tessera.httpTlsSecret" .) "key" "ca.crt" | toJson -}}
{{- end -}}
{{- end -}}

{{/* The environment of an admin-API Job's container (a YAML list). */}}
{{- define "tessera.adminApiEnv" -}}
{{- $r := .Values.registration -}}
- name: TESSERA_URL
  value: {{ include "tessera.adminApiUrl" . | quote }}
# The answers and the session token go to the pod's own emptyDir.
- name: TMPDIR
  value: /tmp
{{- if include "tessera.adminApiCa" . }}
# curl --cacert: the router's certificate must chain to this CA (no -k).
- name: TESSERA_CA_FILE
  value: /etc/tessera/router-ca/ca.crt
{{- end }}
- name: CONNECT_TIMEOUT_SECONDS
  value: {{ $r.connectTimeoutSeconds | quote }}
- name: REQUEST_TIMEOUT_SECONDS
  value: {{ $r.requestTimeoutSeconds | quote }}
- name: RETRY_SECONDS
  value: "3"
- name: ADMIN_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "tessera.authSecret" . }}
      key: admin-username
- name: ADMIN_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "tessera.authSecret" . }}
      key: admin-password
{{- end -}}

{{/* The volume mounts of an admin-API Job's container (a YAML list). */}}
{{- define "tessera.adminApiMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if include "tessera.adminApiCa" . }}
- name: router-ca
  mountPath: /etc/tessera/router-ca
  readOnly: true
{{- end }}
{{- end -}}

{{/* The volumes of an admin-API Job's pod (a YAML list). */}}
{{- define "tessera.adminApiVolumes" -}}
- name: tmp
  emptyDir: {}
{{- with include "tessera.adminApiCa" . }}
{{- $ca := fromJson . }}
# Only the CA certificate of the Secret (the routers' HTTPS Secret also holds
# their private key, which this pod must not see).
- name: router-ca
  secret:
    secretName: {{ $ca.secret }}
    defaultMode: 0444
    items:
      - key: {{ $ca.key | quote }}
        path: ca.crt
{{- end }}
{{- end -}}

{{/*
The Job spec fields and pod spec lines both admin-API Jobs share: pass (list $
component activeDeadlineSeconds). Indent: the Job's spec.
*/}}
{{- define "tessera.adminJobSpec" -}}
{{- $ := index . 0 -}}
{{- $r := $.Values.registration -}}
backoffLimit: 2
# A bound on the whole Job (every attempt); Helm waits for it only --timeout
# (5 minutes by default), the Job runs on when Helm gave up.
activeDeadlineSeconds: {{ int (index . 2) }}
# Kept (with its pod's log) this long after it finished, then deleted.
ttlSecondsAfterFinished: {{ int $r.ttlSecondsAfterFinished }}
template:
  metadata:
    labels:
      {{- include "tessera.selectorLabels" (list $ (index . 1)) | nindent 6 }}
  spec:
    restartPolicy: Never
    serviceAccountName: {{ include "tessera.serviceAccountName" $ }}
    automountServiceAccountToken: false
    securityContext:
      {{- toYaml $.Values.podSecurityContext | nindent 6 }}
    {{- with $.Values.imagePullSecrets }}
    imagePullSecrets:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumes:
      {{- include "tessera.adminApiVolumes" $ | nindent 6 }}
{{- end -}}

{{/*
Shell functions of the admin-API Jobs (POSIX sh, curl and GNU sed: the
image's; no jq). Every call verifies the router's HTTPS certificate against
TESSERA_CA_FILE when set, has a connect and a total timeout, sends the bearer
token from a file (not on curl's command line) and builds JSON bodies with
json_string, which escapes backslash, double quote and every control
character, so any password makes valid JSON. The line "# end of
tessera.adminApiShell" closes it (helm/tests/chart.py runs the functions alone).
*/}}
{{- define "tessera.adminApiShell" -}}
set -u
umask 077
answer=$TMPDIR/answer
header=$TMPDIR/authorization
: > "$header"
token=""
now() { date +%s; }
fail() { echo "$*" >&2; exit 1; }
# json_string S: S as a JSON string, quotes included.
json_string() {
  _s=$1
  set --
  _i=1
  while [ "$_i" -lt 32 ]; do
    _h=$(printf '%02x' "$_i")
    set -- "$@" -e "s/\\x$_h/\\\\u00$_h/g"
    _i=$((_i + 1))
  done
  printf '"%s"' "$(printf '%s' "$_s" | LC_ALL=C sed -z -e 's/\\/\\\\/g' -e 's/"/\\"/g' "$@")"
}
# call METHOD PATH MAX_SECONDS [BODY [CURL ARGUMENTS...]]: the status in
# $code (000: no answer), the body in $answer.
call() {
  _method=$1 _path=$2 _max=$3 _body=${4-}
  shift 3
  [ $# -gt 0 ] && shift
  [ -n "$_body" ] && set -- --data-binary @- "$@"
  : > "$answer"
  code=$(printf '%s' "$_body" | curl -sS -o "$answer" -w '%{http_code}' \
    --connect-timeout "$CONNECT_TIMEOUT_SECONDS" --max-time "$_max" \
    ${TESSERA_CA_FILE:+--cacert "$TESSERA_CA_FILE"} \
    -X "$_method" -H @"$header" -H 'content-type: application/json' "$@" \
    "$TESSERA_URL$_path") || code=000
}
said() { tr -d '\n' < "$answer" | cut -c1-600; }
login() {
  : > "$header"
  call POST /api/v1/auth/login "$REQUEST_TIMEOUT_SECONDS" \
    "{\"username\":$(json_string "$ADMIN_USERNAME"),\"password\":$(json_string "$ADMIN_PASSWORD")}"
  token=$(sed -n 's/.*"token"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$answer")
  if [ "$code" = 200 ] && [ -n "$token" ]; then
    printf 'authorization: Bearer %s\n' "$token" > "$header"
    return 0
  fi
  token=""
  echo "signing in as $ADMIN_USERNAME at $TESSERA_URL: $code $(said)" >&2
  return 1
}
# retryable: whether the last call may succeed later (no answer, the router
# busy or starting, the session expired, or one of the given 409 reasons).
retryable() {
  case $code in
    000|5??) return 0 ;;
    401) token=""; return 0 ;;
    409) [ $# -gt 0 ] && grep -Eq "$1" "$answer" ;;
    *) return 1 ;;
  esac
}
# show_nodes: the members and their states (GET /api/v1/admin/nodes).
show_nodes() {
  call GET /api/v1/admin/nodes "$REQUEST_TIMEOUT_SECONDS"
  [ "$code" = 200 ] || return 0
  grep -o '"id":[0-9]*,"address":"[^"]*","state":"[a-z]*"' "$answer" \
    | sed 's/"id":\([0-9]*\),"address":"\([^"]*\)","state":"\([a-z]*\)"/  node \1 (\2): \3/'
}
# end of tessera.adminApiShell
{{- end -}}
