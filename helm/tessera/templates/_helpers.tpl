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
The router tessera-meetings calls, as scheme://host:port: meetings.routerUrl, or
the chart's router Service by its in-cluster DNS name. The application checks
HTTPS certificates against the public web PKI roots only (reqwest with
webpki-roots), so it cannot trust the chart's own CA: with tls.http.enabled the
chart's router needs meetings.routerUrl instead.
*/}}
{{- define "tessera.meetingsRouter" -}}
{{- $m := .Values.meetings -}}
{{- if $m.routerUrl -}}
{{- $u := urlParse $m.routerUrl -}}
{{- if or (not (has $u.scheme (list "tessera" "tesseras" "http" "https"))) (not (regexMatch ":[0-9]+$" $u.host)) (not (has $u.path (list "" "/"))) $u.userinfo $u.query -}}
{{- fail (printf "meetings.routerUrl %q: give scheme://host:port (tessera, tesseras, http or https; the port too), no user, path or query" $m.routerUrl) -}}
{{- end -}}
{{- /* tessera:// and tesseras:// keep a default port (443) in the URL; the application takes a missing port for 9090. */ -}}
{{- printf "%s://%s" (get (dict "http" "tessera" "https" "tesseras" "tessera" "tessera" "tesseras" "tesseras") $u.scheme) $u.host -}}
{{- else if .Values.tls.http.enabled -}}
{{- fail "meetings.enabled with tls.http.enabled: tessera-meetings verifies HTTPS against the public web PKI roots only and cannot trust the chart's CA; set tls.http.enabled=false (plain HTTP inside the cluster) or meetings.routerUrl to a router URL whose certificate a public CA issued" -}}
{{- else -}}
{{- printf "tessera://%s.%s.svc.%s:%d" (include "tessera.routerName" .) .Release.Namespace .Values.clusterDomain (int .Values.router.service.port) -}}
{{- end -}}
{{- end -}}
