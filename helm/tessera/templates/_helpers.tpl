{{/* The chart's name. */}}
{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name (objects are named after it). */}}
{{- define "tessera.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tessera.nodeName" -}}{{ include "tessera.fullname" . }}-node{{- end -}}
{{- define "tessera.headlessName" -}}{{ include "tessera.fullname" . }}-node-headless{{- end -}}
{{- define "tessera.routerName" -}}{{ include "tessera.fullname" . }}-router{{- end -}}
{{- define "tessera.configName" -}}{{ include "tessera.fullname" . }}-config{{- end -}}
{{- define "tessera.secretName" -}}{{ include "tessera.fullname" . }}-secrets{{- end -}}

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

{{/* Labels of every object. */}}
{{- define "tessera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (node or router): pass (list $ "node"). */}}
{{- define "tessera.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "tessera.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
The nodes as `id=host:port`, id = ordinal + 1, host = the pod's stable DNS name
under the headless Service (or node.peerHosts[ordinal]).
*/}}
{{- define "tessera.peers" -}}
{{- $replicas := int .Values.node.replicas -}}
{{- if and .Values.node.peerHosts (ne (len .Values.node.peerHosts) $replicas) -}}
{{- fail (printf "node.peerHosts names %d hosts for %d node replicas" (len .Values.node.peerHosts) $replicas) -}}
{{- end -}}
{{- $peers := list -}}
{{- range $i := until $replicas -}}
{{- $host := printf "%s-%d.%s.%s.svc.%s" (include "tessera.nodeName" $) $i (include "tessera.headlessName" $) $.Release.Namespace $.Values.clusterDomain -}}
{{- if $.Values.node.peerHosts -}}{{- $host = index $.Values.node.peerHosts $i -}}{{- end -}}
{{- $peers = append $peers (printf "%d=%s:%d" (add1 $i) $host (int $.Values.node.ports.grpc)) -}}
{{- end -}}
{{- join "," $peers -}}
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
{{- default (printf "%s-cluster-tls-node" (include "tessera.fullname" .)) .Values.tls.cluster.existingSecret -}}
{{- end -}}
{{- define "tessera.routerTlsSecret" -}}
{{- default (printf "%s-cluster-tls-router" (include "tessera.fullname" .)) .Values.tls.cluster.existingRouterSecret -}}
{{- end -}}

{{/* The Secret holding the routers' HTTPS certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "tessera.httpTlsSecret" -}}
{{- default (printf "%s-http-tls" (include "tessera.fullname" .)) .Values.tls.http.existingSecret -}}
{{- end -}}

{{/* The Secret holding the cluster CA's certificate and key (chart-made certificates only). */}}
{{- define "tessera.caSecret" -}}{{ include "tessera.fullname" . }}-cluster-ca{{- end -}}

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
{{- define "tessera.meetingsName" -}}{{ include "tessera.fullname" . }}-meetings{{- end -}}
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
