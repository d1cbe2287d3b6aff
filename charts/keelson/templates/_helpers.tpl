{{/* Names ------------------------------------------------------------------- */}}

{{- define "keelson.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "keelson.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>" (component names are short: 40 characters left). */}}
{{- define "keelson.component" -}}
{{- printf "%s-%s" (include "keelson.fullname" .root | trunc 40 | trimSuffix "-") .component -}}
{{- end -}}

{{- define "keelson.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "keelson.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "keelson.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels ------------------------------------------------------------------ */}}

{{- define "keelson.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "keelson.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: keelson
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "gateway") */}}
{{- define "keelson.selectorLabels" -}}
app.kubernetes.io/name: {{ include "keelson.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "keelson.componentLabels" -}}
{{ include "keelson.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Addresses ---------------------------------------------------------------- */}}

{{- define "keelson.listen" -}}
{{- $host := .root.Values.listenHost -}}
{{- if contains ":" $host -}}
{{- printf "[%s]:%v" $host .port -}}
{{- else -}}
{{- printf "%s:%v" $host .port -}}
{{- end -}}
{{- end -}}

{{- define "keelson.controllerHeadless" -}}
{{- include "keelson.component" (dict "root" . "component" "controller-peers") -}}
{{- end -}}

{{- define "keelson.etcdName" -}}
{{- include "keelson.component" (dict "root" . "component" "etcd") -}}
{{- end -}}

{{/* The controllers' peer list: name=host:port with stable StatefulSet names. */}}
{{- define "keelson.controllerPeers" -}}
{{- $name := include "keelson.component" (dict "root" . "component" "controller") -}}
{{- $svc := include "keelson.controllerHeadless" . -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $pod := printf "%s-%d" $name $i -}}
{{- $peers = append $peers (printf "%s=%s.%s.%s.svc.%s:%v" $pod $pod $svc $.Release.Namespace $.Values.clusterDomain $.Values.controller.port) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{/* etcd client URLs: the in-chart StatefulSet's, else etcd.endpoints. */}}
{{- define "keelson.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $name := include "keelson.etcdName" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s.%s.svc.%s:2379" $name $i $name $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.etcd.endpoints -}}
{{- end -}}
{{- end -}}

{{/* The INI ------------------------------------------------------------------- */}}

{{/* One value as oslo.config reads it: lists comma-joined, integral numbers
     without an exponent, booleans lower-case. */}}
{{- define "keelson.iniValue" -}}
{{- $v := . -}}
{{- if kindIs "slice" $v -}}
{{- $items := list -}}
{{- range $v }}{{ $items = append $items (include "keelson.iniValue" .) }}{{ end -}}
{{- join "," $items -}}
{{- else if kindIs "float64" $v -}}
{{- if eq $v (floor $v) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end -}}
{{- else if kindIs "invalid" $v -}}
{{- else -}}
{{- $v -}}
{{- end -}}
{{- end -}}

{{/* An INI document from a map group -> option -> value (sorted). */}}
{{- define "keelson.ini" -}}
{{- range $group := keys . | sortAlpha }}

[{{ $group }}]
{{- $opts := get $ $group }}
{{- range $name := keys $opts | sortAlpha }}
{{ $name }} = {{ include "keelson.iniValue" (get $opts $name) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The options the chart computes from its topology; they win over `conf`. */}}
{{- define "keelson.computedConf" -}}
{{- $v := .Values -}}
{{- $fullname := include "keelson.fullname" . -}}
{{- $inv := include "keelson.component" (dict "root" . "component" "inventory") -}}
{{- $cand := include "keelson.component" (dict "root" . "component" "candidates") -}}
{{- $eng := include "keelson.component" (dict "root" . "component" "engine") -}}
keelson:
  placement_listen: {{ include "keelson.listen" (dict "root" . "port" $v.gateway.service.placementPort) | quote }}
  orchestration_listen: {{ include "keelson.listen" (dict "root" . "port" $v.gateway.service.orchestrationPort) | quote }}
  inventory_listen: {{ include "keelson.listen" (dict "root" . "port" $v.inventory.port) | quote }}
  candidates_listen: {{ include "keelson.listen" (dict "root" . "port" $v.candidates.port) | quote }}
  engine_listen: {{ include "keelson.listen" (dict "root" . "port" $v.engine.port) | quote }}
  inventory_endpoint: {{ printf "http://%s:%v" $inv $v.inventory.port | quote }}
  candidates_endpoint: {{ printf "http://%s:%v" $cand $v.candidates.port | quote }}
  engine_endpoints: {{ printf "http://%s:%v" $eng $v.engine.port | quote }}
  data_dir: /var/lib/keelson
{{- if $v.tls.enabled }}
  tls_cert_file: /etc/keelson/tls/tls.crt
  tls_key_file: /etc/keelson/tls/tls.key
  tls_ca_file: /etc/keelson/tls/ca.crt
  {{- /* Engines dial each other by pod IP: every server is checked against one name. */}}
  tls_server_name: {{ default $fullname $v.tls.serverName | quote }}
{{- end }}
controller:
  listen: {{ include "keelson.listen" (dict "root" . "port" $v.controller.port) | quote }}
  peers: {{ include "keelson.controllerPeers" . | quote }}
{{- $etcd := include "keelson.etcdEndpoints" . }}
{{- if $etcd }}
etcd:
  endpoints: {{ $etcd | quote }}
{{- end }}
{{- end -}}

{{- define "keelson.conf" -}}
{{- $computed := include "keelson.computedConf" . | fromYaml -}}
{{- $ini := merge $computed (deepCopy .Values.conf) -}}
# keelson configuration, rendered by the Helm chart from .Values.conf and the
# chart's topology (listen addresses, endpoints, controller peers, etcd).
# Database URLs and Keystone credentials are in Secrets (further
# --config-file arguments); each pod adds its own node.conf.

{{ include "keelson.ini" $ini | trim }}
{{- end -}}

{{/* Whether either API authenticates with Keystone. */}}
{{- define "keelson.keystoneEnabled" -}}
{{- if or (eq (toString (dig "api" "auth_strategy" "keystone" .Values.conf)) "keystone") (eq (toString (dig "orchestration" "auth_strategy" "keystone" .Values.conf)) "keystone") -}}
true
{{- end -}}
{{- end -}}

{{- define "keelson.databaseSecret" -}}
{{- default (include "keelson.component" (dict "root" . "component" "database")) .Values.database.existingSecret -}}
{{- end -}}

{{- define "keelson.keystoneSecret" -}}
{{- default (include "keelson.component" (dict "root" . "component" "keystone")) .Values.keystone.existingSecret -}}
{{- end -}}

{{- define "keelson.tlsSecret" -}}
{{- default (include "keelson.component" (dict "root" . "component" "tls")) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "keelson.databaseIni" -}}
{{- $ini := dict -}}
{{- if .Values.database.placement }}{{ $_ := set $ini "placement_database" (dict "connection" .Values.database.placement) }}{{ end -}}
{{- if .Values.database.orchestration }}{{ $_ := set $ini "database" (dict "connection" .Values.database.orchestration) }}{{ end -}}
# The database URLs (rendered by the Helm chart).

{{ include "keelson.ini" $ini | trim }}
{{- end -}}

{{- define "keelson.keystoneIni" -}}
{{- $k := .Values.keystone -}}
{{- $opts := dict "auth_type" "password" "username" $k.username "password" $k.password "project_name" $k.projectName "user_domain_name" $k.userDomainName "project_domain_name" $k.projectDomainName -}}
{{- if $k.authUrl }}{{ $_ := set $opts "auth_url" $k.authUrl }}{{ end -}}
{{- if $k.wwwAuthenticateUri }}{{ $_ := set $opts "www_authenticate_uri" $k.wwwAuthenticateUri }}{{ end -}}
{{- if $k.regionName }}{{ $_ := set $opts "region_name" $k.regionName }}{{ end -}}
# The gateway's Keystone service user (rendered by the Helm chart).

{{ include "keelson.ini" (dict "keystone_authtoken" $opts) | trim }}
{{- end -}}

{{/* Pod pieces ------------------------------------------------------------- */}}

{{- define "keelson.podAnnotations" -}}
checksum/config: {{ include "keelson.conf" . | sha256sum }}
{{- if not .Values.database.existingSecret }}
checksum/database: {{ include "keelson.databaseIni" . | sha256sum }}
{{- end }}
{{- if and (include "keelson.keystoneEnabled" .) (not .Values.keystone.existingSecret) }}
checksum/keystone: {{ include "keelson.keystoneIni" . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The --config-file arguments:
     (dict "root" $ "db" bool "keystone" bool "node" bool) */}}
{{- define "keelson.configArgs" -}}
- --config-file
- /etc/keelson/keelson.conf
{{- if .db }}
- --config-file
- /etc/keelson/database/{{ .root.Values.database.secretKey }}
{{- end }}
{{- if .keystone }}
- --config-file
- /etc/keelson/keystone/{{ .root.Values.keystone.secretKey }}
{{- end }}
{{- if .node }}
- --config-file
- /run/keelson/node.conf
{{- end }}
{{- end -}}

{{/* Volumes of a keelson pod:
     (dict "root" $ "db" bool "keystone" bool "dataVolume" bool) */}}
{{- define "keelson.volumes" -}}
- name: config
  configMap:
    name: {{ include "keelson.fullname" .root }}
{{- if .db }}
- name: database
  secret:
    secretName: {{ include "keelson.databaseSecret" .root }}
    items:
      - key: {{ .root.Values.database.secretKey }}
        path: {{ .root.Values.database.secretKey }}
{{- end }}
{{- if .keystone }}
- name: keystone
  secret:
    secretName: {{ include "keelson.keystoneSecret" .root }}
    items:
      - key: {{ .root.Values.keystone.secretKey }}
        path: {{ .root.Values.keystone.secretKey }}
{{- end }}
{{- if .root.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "keelson.tlsSecret" .root }}
{{- end }}
- name: run
  emptyDir:
    medium: Memory
    sizeLimit: 8Mi
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if not .dataVolume }}
- name: data
  emptyDir:
    sizeLimit: 256Mi
{{- end }}
{{- end -}}

{{- define "keelson.volumeMounts" -}}
- name: config
  mountPath: /etc/keelson/keelson.conf
  subPath: keelson.conf
  readOnly: true
{{- if .db }}
- name: database
  mountPath: /etc/keelson/database
  readOnly: true
{{- end }}
{{- if .keystone }}
- name: keystone
  mountPath: /etc/keelson/keystone
  readOnly: true
{{- end }}
{{- if .root.Values.tls.enabled }}
- name: tls
  mountPath: /etc/keelson/tls
  readOnly: true
{{- end }}
- name: run
  mountPath: /run/keelson
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /var/lib/keelson
{{- end -}}

{{/* An init container writing this pod's own INI fragment (/run/keelson/node.conf)
     from the downward API: (dict "root" $ "body" "printf ...") */}}
{{- define "keelson.nodeConfInit" -}}
- name: node-conf
  image: {{ include "keelson.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command: ["/bin/sh", "-ec"]
  args:
    - {{ .body | quote }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
  securityContext:
    {{- toYaml .root.Values.containerSecurityContext | nindent 4 }}
  resources:
    requests: {cpu: 10m, memory: 8Mi}
    limits: {cpu: 100m, memory: 32Mi}
  volumeMounts:
    - name: run
      mountPath: /run/keelson
{{- end -}}

{{- define "keelson.podCommon" -}}
serviceAccountName: {{ include "keelson.serviceAccountName" .root }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .values.affinity }}
affinity:
  {{- toYaml .values.affinity | nindent 2 }}
{{- else }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "keelson.selectorLabels" . | nindent 14 }}
{{- end }}
{{- end -}}

{{- /* The kubelet's gRPC probe has no client certificate: with mutual
TLS the probes check the port instead. */}}
{{- define "keelson.grpcProbes" -}}
{{- $probe := ternary "tcpSocket" "grpc" .root.Values.tls.enabled -}}
readinessProbe:
  {{ $probe }}:
    port: {{ .port }}
  {{- toYaml .root.Values.probes.readiness | nindent 2 }}
livenessProbe:
  {{ $probe }}:
    port: {{ .port }}
  {{- toYaml .root.Values.probes.liveness | nindent 2 }}
{{- end -}}

{{/* A NetworkPolicy peer: the pods of one component of this release. */}}
{{- define "keelson.npPeer" -}}
- podSelector:
    matchLabels:
      {{- include "keelson.selectorLabels" . | nindent 6 }}
{{- end -}}
