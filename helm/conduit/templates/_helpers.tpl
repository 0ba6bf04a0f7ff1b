{{/*
Names. The release's full name, shortened to the 63 characters Kubernetes names allow; every
object of a service is "<fullname>-<service>" (a StatefulSet's pods add "-0", its PVCs
"data-…-0": keep room for them).
*/}}
{{- define "conduit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "conduit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "conduit.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "conduit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "conduit.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "conduit.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "conduit.labels" -}}
helm.sh/chart: {{ include "conduit.chart" . }}
app.kubernetes.io/name: {{ include "conduit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: conduit
{{- end -}}

{{/* Selector labels of one service's pods: (root, name). */}}
{{- define "conduit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "conduit.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/*
What the chart knows about each service: the binary, the gRPC service its readiness asks for,
and the Prometheus job name (the same in docker-compose, so one set of alert rules and one
dashboard serve both).
*/}}
{{- define "conduit.serviceTable" -}}
broker:
  binary: conduit-broker
  healthService: conduit.log.v1.LogService
  job: conduit-broker
coordinator:
  binary: conduit-coordinator
  healthService: conduit.coordinator.v1.GroupCoordinator
  job: conduit-coordinator
queue:
  binary: conduit-queue
  healthService: conduit.queue.v1.WorkQueue
  job: conduit-queue
standalone:
  binary: conduit-standalone
  healthService: conduit.log.v1.LogService
  job: conduit-standalone
{{- end -}}

{{/* The services this release runs, as a YAML list: [standalone] or the enabled ones. */}}
{{- define "conduit.enabledServices" -}}
{{- $_ := include "conduit.cluster" . -}}
{{- $names := list -}}
{{- if .Values.standalone.enabled -}}
{{- $names = list "standalone" -}}
{{- else -}}
{{- range $name := list "broker" "coordinator" "queue" -}}
{{- if (index $.Values $name).enabled -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $names -}}
{{- fail "nothing to deploy: enable broker, coordinator or queue, or standalone" -}}
{{- end -}}
{{- toYaml $names -}}
{{- end -}}

{{/*
One service's settings: .Values.defaults overlaid with the service's own section and the
service table entry. Call with (dict "root" $ "name" "broker"); returns YAML (use fromYaml).
The coordinator's extraFlags gain broker_address: coordinator.brokerAddress, else an
extraFlags.broker_address of its own, else this release's broker client Service
(<fullname>-broker.<namespace>.svc:<broker grpcPort>, which routes to the ready broker only).
*/}}
{{- define "conduit.serviceValues" -}}
{{- $own := deepCopy (index .root.Values .name) -}}
{{- $table := index (include "conduit.serviceTable" . | fromYaml) .name -}}
{{- $merged := mergeOverwrite (deepCopy .root.Values.defaults) $own -}}
{{- $_ := set $merged "binary" $table.binary -}}
{{- $_ := set $merged "job" $table.job -}}
{{- $_ := set $merged "healthService" (default $table.healthService $own.healthService) -}}
{{- $_ := set $merged "name" .name -}}
{{- $_ := set $merged "objectName" (printf "%s-%s" (include "conduit.fullname" .root) .name) -}}
{{- $_ := set $merged "replicas" 1 -}}
{{- if and (eq .name "broker") (include "conduit.cluster" .root) -}}
{{- $flags := default (dict) $merged.extraFlags -}}
{{- $_ := set $flags "etcd_endpoints" (include "conduit.etcdEndpoints" .root) -}}
{{- $_ := set $flags "cluster_name" (default (include "conduit.fullname" .root) .root.Values.cluster.name) -}}
{{- $_ := set $flags "etcd_lease_ttl" .root.Values.cluster.leaseTTL -}}
{{- $_ := set $merged "extraFlags" $flags -}}
{{- $_ := set $merged "cluster" true -}}
{{- $_ := set $merged "replicas" (int (default 3 $own.replicas)) -}}
{{- end -}}
{{- if eq .name "coordinator" -}}
{{- $flags := default (dict) $merged.extraFlags -}}
{{- $address := coalesce $merged.brokerAddress (get $flags "broker_address") -}}
{{- if not $address -}}
{{- if not .root.Values.broker.enabled -}}
{{- fail "coordinator.enabled needs a log broker: enable broker, or set coordinator.brokerAddress (host:port)" -}}
{{- end -}}
{{- $broker := include "conduit.serviceValues" (dict "root" .root "name" "broker") | fromYaml -}}
{{- $address = printf "%s.%s.svc:%v" $broker.objectName .root.Release.Namespace $broker.grpcPort -}}
{{- end -}}
{{- $_ := set $flags "broker_address" $address -}}
{{- $_ := set $merged "extraFlags" $flags -}}
{{- $_ := unset $merged "brokerAddress" -}}
{{- end -}}
{{- toYaml $merged -}}
{{- end -}}

{{/*
The flag file of one service (absl --flagfile format: one --name=value a line). Call with the
service values from conduit.serviceValues.
*/}}
{{- define "conduit.flagFile" -}}
--data_dir=/var/lib/conduit
--listen={{ .grpcListenHost }}:{{ .grpcPort }}
--metrics_listen={{ .metricsListenHost }}:{{ .metricsPort }}
--log_level={{ .logLevel }}
{{- range $flag, $value := .extraFlags }}
--{{ $flag }}={{ $value }}
{{- end }}
{{- end -}}

{{/*
Cluster mode: "true" when cluster.enabled, else "". Fails on values that cannot work together;
conduit.enabledServices calls it, so every template checks them.
*/}}
{{- define "conduit.cluster" -}}
{{- $v := .Values -}}
{{- if $v.cluster.enabled -}}
{{- if $v.standalone.enabled -}}
{{- fail "cluster.enabled: conduit-standalone has no cluster mode; set standalone.enabled=false" -}}
{{- end -}}
{{- if not $v.broker.enabled -}}
{{- fail "cluster.enabled needs the broker: set broker.enabled=true" -}}
{{- end -}}
{{- if and $v.etcd.enabled $v.etcd.endpoints -}}
{{- fail "etcd.endpoints names an existing etcd: set etcd.enabled=false to use it instead of this chart's" -}}
{{- end -}}
{{- if not (or $v.etcd.enabled $v.etcd.endpoints) -}}
{{- fail "cluster.enabled needs etcd: etcd.enabled=true (a StatefulSet in this release) or etcd.endpoints (host:port list)" -}}
{{- end -}}
{{- if not (semverCompare ">=1.28.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail "cluster.enabled needs Kubernetes 1.28+: each broker's id is its pod-index label" -}}
{{- end -}}
true
{{- else if and (not (kindIs "invalid" $v.broker.replicas)) (ne (int $v.broker.replicas) 1) -}}
{{- fail "broker.replicas above 1 needs cluster.enabled: single-node brokers behind one Service would be unrelated logs" -}}
{{- end -}}
{{- end -}}

{{/* The in-chart etcd: its StatefulSet's name (the headless Service adds "-headless"). */}}
{{- define "conduit.etcdName" -}}
{{- printf "%s-etcd" (include "conduit.fullname" .) -}}
{{- end -}}

{{/* One in-chart etcd member's stable DNS name: (root, ordinal). */}}
{{- define "conduit.etcdMember" -}}
{{- $name := include "conduit.etcdName" .root -}}
{{- printf "%s-%d.%s-headless.%s.svc" $name (int .ordinal) $name .root.Release.Namespace -}}
{{- end -}}

{{/* The brokers' --etcd_endpoints: every in-chart member's client address, or etcd.endpoints. */}}
{{- define "conduit.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $members := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $members = append $members (printf "%s:2379" (include "conduit.etcdMember" (dict "root" $ "ordinal" $i))) -}}
{{- end -}}
{{- join "," $members -}}
{{- else -}}
{{- join "," .Values.etcd.endpoints -}}
{{- end -}}
{{- end -}}
