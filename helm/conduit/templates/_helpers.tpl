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
With security.tls.enabled, conduit-standalone's gains broker_address: its own client Service (a
name the certificate holds). The queue's gain bridge_bootstrap and bridge_coordinator: the broker's
and the coordinator's client Services (when enabled and not set in extraFlags). securityFlags:
conduit.securityFlags, which extraFlags may not repeat.
replicas: 1, or broker.replicas (null: 3) for the cluster-mode brokers. Fails when grpcPort and
metricsPort are one port.
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
{{- if eq .name "queue" -}}
{{- /* The queue's bridges read topics from the log broker and join groups at the coordinator:
this release's client Services, unless extraFlags names others (a queue alone asks its own
address, which serves no log). */ -}}
{{- $flags := default (dict) $merged.extraFlags -}}
{{- if and .root.Values.broker.enabled (not (hasKey $flags "bridge_bootstrap")) -}}
{{- $broker := include "conduit.serviceValues" (dict "root" .root "name" "broker") | fromYaml -}}
{{- $_ := set $flags "bridge_bootstrap" (printf "%s.%s.svc:%v" $broker.objectName .root.Release.Namespace $broker.grpcPort) -}}
{{- end -}}
{{- if and .root.Values.coordinator.enabled (not (hasKey $flags "bridge_coordinator")) -}}
{{- $coordinator := include "conduit.serviceValues" (dict "root" .root "name" "coordinator") | fromYaml -}}
{{- $_ := set $flags "bridge_coordinator" (printf "%s.%s.svc:%v" $coordinator.objectName .root.Release.Namespace $coordinator.grpcPort) -}}
{{- end -}}
{{- $_ := set $merged "extraFlags" $flags -}}
{{- end -}}
{{- if and (eq .name "standalone") .root.Values.security.tls.enabled -}}
{{- /* Its coordinator asks the log service on the server's own listen address (0.0.0.0), a name
no certificate holds: with TLS it dials the client Service, which the certificate names. */ -}}
{{- $flags := default (dict) $merged.extraFlags -}}
{{- if not (hasKey $flags "broker_address") -}}
{{- $_ := set $flags "broker_address" (printf "%s.%s.svc:%v" $merged.objectName .root.Release.Namespace $merged.grpcPort) -}}
{{- end -}}
{{- $_ := set $merged "extraFlags" $flags -}}
{{- end -}}
{{- $security := include "conduit.securityFlags" .root | fromYamlArray -}}
{{- range $flag := $security -}}
{{- $flagName := first (splitList "=" $flag) -}}
{{- if hasKey (default (dict) $merged.extraFlags) $flagName -}}
{{- fail (printf "%s.extraFlags.%s: the security values set --%s; set it there, not in extraFlags" $.name $flagName $flagName) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $merged "securityFlags" $security -}}
{{- if eq (int $merged.grpcPort) (int $merged.metricsPort) -}}
{{- fail (printf "%s: grpcPort and metricsPort are both %v; the servers cannot bind one port twice" .name $merged.grpcPort) -}}
{{- end -}}
{{- toYaml $merged -}}
{{- end -}}

{{/*
A PodDisruptionBudget's spec fields for a service of `replicas` pods with the merged
podDisruptionBudget values `pdb` (minAvailable, maxUnavailable: an integer, a percentage or null):
call with (dict "replicas" N "pdb" $v.podDisruptionBudget "what" "broker"). Returns YAML
(minAvailable: or maxUnavailable:), or "" when no budget protects anything: one pod. Default
(both null): maxUnavailable 1, one pod at a time (for the brokers: topics' default replication,
factor 3 with min in-sync 2, stays writable with one replica out). Fails on a budget that lets no
pod go (minAvailable >= replicas after Kubernetes' rounding up of percentages; maxUnavailable 0
the schema refuses) and on both fields set (Kubernetes takes one).
*/}}
{{- define "conduit.disruptionBudget" -}}
{{- $n := int .replicas -}}
{{- $pdb := default (dict) .pdb -}}
{{- $min := $pdb.minAvailable -}}
{{- $max := $pdb.maxUnavailable -}}
{{- if and (not (kindIs "invalid" $min)) (not (kindIs "invalid" $max)) -}}
{{- fail (printf "podDisruptionBudget of %s (defaults merged with %s's own): set minAvailable or maxUnavailable, not both" .what .what) -}}
{{- end -}}
{{- if gt $n 1 -}}
{{- if not (kindIs "invalid" $min) -}}
{{- $pods := 0 -}}
{{- if kindIs "string" $min -}}
{{- /* Kubernetes rounds a percentage of pods up. */ -}}
{{- $pods = div (add (mul (trimSuffix "%" $min | atoi) $n) 99) 100 -}}
{{- else -}}
{{- $pods = int $min -}}
{{- end -}}
{{- if ge (int $pods) $n -}}
{{- fail (printf "podDisruptionBudget of %s: minAvailable %v keeps all %d pods, so every voluntary eviction (a node drain) would hang; allow at least one pod to go" .what $min $n) -}}
{{- end -}}
{{- toYaml (dict "minAvailable" $min) -}}
{{- else -}}
{{- toYaml (dict "maxUnavailable" (ternary 1 $max (kindIs "invalid" $max))) -}}
{{- end -}}
{{- end -}}
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
{{- range .securityFlags }}
--{{ . }}
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

{{/*
Security (values security.*). Every Conduit container gets the same settings: Secrets
and the ACL ConfigMap mounted read-only as whole directories under /etc/conduit-security/ (Secret
and ConfigMap volumes are swapped atomically, which the servers' file reloading relies on; a
subPath mount would never update), and the flags naming those files. Off by default: nothing is
rendered.
*/}}
{{- define "conduit.securityDir" -}}/etc/conduit-security{{- end -}}

{{/* "true" when the metrics port serves HTTPS (security.tls.enabled and security.tls.metrics), else "". */}}
{{- define "conduit.metricsTls" -}}
{{- if and .Values.security.tls.enabled .Values.security.tls.metrics -}}true{{- end -}}
{{- end -}}

{{/* The ACL bootstrap file's ConfigMap (one per release). */}}
{{- define "conduit.aclConfigMapName" -}}
{{- printf "%s-acls" (include "conduit.fullname" .) -}}
{{- end -}}

{{/* One ACL entry (values security.authorization.acls[]) as an ACL file line. */}}
{{- define "conduit.aclLine" -}}
{{- $name := default "*" .name -}}
{{- printf "%s %s %s %s %s %s" .permission .principal .resourceType .patternType $name (join "," .operations) -}}
{{- end -}}

{{/*
The security flags as a YAML list of "name=value" (underscored names, as the flag file wants),
in a fixed order; [] when security is off. Fails on settings that cannot work together.
*/}}
{{- define "conduit.securityFlags" -}}
{{- $s := .Values.security -}}
{{- $dir := include "conduit.securityDir" . -}}
{{- $flags := list -}}
{{- if and $s.tls.metrics (not $s.tls.enabled) -}}
{{- fail "security.tls.metrics needs security.tls.enabled: the metrics port serves HTTPS with the TLS Secret's files" -}}
{{- end -}}
{{- if $s.tls.enabled -}}
{{- if not $s.tls.secretName -}}
{{- fail "security.tls.enabled needs security.tls.secretName: a kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt)" -}}
{{- end -}}
{{- $tls := printf "%s/tls" $dir -}}
{{- $flags = append $flags (printf "tls_cert=%s/tls.crt" $tls) -}}
{{- $flags = append $flags (printf "tls_key=%s/tls.key" $tls) -}}
{{- $auth := default "none" $s.tls.clientAuth -}}
{{- if ne $auth "none" -}}
{{- $flags = append $flags (printf "tls_client_ca=%s/ca.crt" $tls) -}}
{{- end -}}
{{- $flags = append $flags (printf "tls_client_auth=%s" $auth) -}}
{{- $flags = append $flags (printf "tls_refresh_seconds=%d" (int (default 60 $s.tls.refreshSeconds))) -}}
{{- /* The servers dial each other over TLS, trusting the same CA; with mTLS they present their own certificate. */ -}}
{{- $flags = append $flags (printf "peer_tls_ca=%s/ca.crt" $tls) -}}
{{- if eq $auth "require" -}}
{{- $flags = append $flags (printf "peer_tls_cert=%s/tls.crt" $tls) -}}
{{- $flags = append $flags (printf "peer_tls_key=%s/tls.key" $tls) -}}
{{- end -}}
{{- /* The metrics port over HTTPS, same files (read on every scrape); with require, scrapers present a certificate of ca.crt. */ -}}
{{- if $s.tls.metrics -}}
{{- $flags = append $flags (printf "metrics_tls_cert=%s/tls.crt" $tls) -}}
{{- $flags = append $flags (printf "metrics_tls_key=%s/tls.key" $tls) -}}
{{- if eq $auth "require" -}}
{{- $flags = append $flags (printf "metrics_tls_client_ca=%s/ca.crt" $tls) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $s.auth.peerTokenSecretName -}}
{{- $flags = append $flags (printf "peer_token_file=%s/peer-token/token" $dir) -}}
{{- end -}}
{{- if $s.auth.tokenSecretName -}}
{{- $flags = append $flags (printf "auth_token_file=%s/tokens/tokens" $dir) -}}
{{- end -}}
{{- with $s.auth.jwt -}}
{{- if .keys -}}
{{- if not (and .secretName .issuer .audience) -}}
{{- fail "security.auth.jwt.keys needs security.auth.jwt.secretName, issuer and audience" -}}
{{- end -}}
{{- $keys := list -}}
{{- range .keys -}}
{{- $keys = append $keys (printf "%s:%s/jwt/%s" .algorithm $dir .key) -}}
{{- end -}}
{{- $flags = append $flags (printf "auth_jwt_keys=%s" (join "," $keys)) -}}
{{- $flags = append $flags (printf "auth_jwt_issuer=%s" .issuer) -}}
{{- $flags = append $flags (printf "auth_jwt_audience=%s" .audience) -}}
{{- end -}}
{{- end -}}
{{- $z := $s.authorization -}}
{{- if $z.enabled -}}
{{- $flags = append $flags "authorization=true" -}}
{{- with $z.acls -}}
{{- $flags = append $flags (printf "acl_file=%s/acls/acls" $dir) -}}
{{- end -}}
{{- with $z.superusers -}}
{{- $flags = append $flags (printf "superusers=%s" (join "," .)) -}}
{{- end -}}
{{- end -}}
{{- if or $s.auth.tokenSecretName (and $z.enabled $z.acls) -}}
{{- $flags = append $flags (printf "auth_reload_seconds=%d" (int $s.auth.reloadSeconds)) -}}
{{- end -}}
{{- range $key, $flag := dict "produceBytes" "quota_produce_bytes" "fetchBytes" "quota_fetch_bytes" "requests" "quota_requests" -}}
{{- $rate := index $s.quotas $key -}}
{{- if $rate -}}
{{- /* Values are float64: print whole rates as integers (1048576, not 1.048576e+06). */ -}}
{{- $text := ternary (printf "%d" (int64 $rate)) (printf "%v" $rate) (eq (float64 $rate) (float64 (int64 $rate))) -}}
{{- $flags = append $flags (printf "%s=%s" $flag $text) -}}
{{- end -}}
{{- end -}}
{{- toYaml $flags -}}
{{- end -}}

{{/* The security volumes of a pod (a YAML list, [] when security is off). */}}
{{- define "conduit.securityVolumes" -}}
{{- $s := .Values.security -}}
{{- $volumes := list -}}
{{- /* With the pod's fsGroup the files are root:<fsGroup> 0440 (288): readable by the server's
group only. Without one, Kubernetes' default mode (0644), or uid 10001 could not read them. */ -}}
{{- $secret := dict -}}
{{- if .Values.podSecurityContext.fsGroup -}}
{{- $secret = dict "defaultMode" 288 -}}
{{- end -}}
{{- if $s.tls.enabled -}}
{{- $volumes = append $volumes (dict "name" "tls" "secret" (merge (dict "secretName" $s.tls.secretName) $secret)) -}}
{{- end -}}
{{- if $s.auth.tokenSecretName -}}
{{- $volumes = append $volumes (dict "name" "auth-tokens" "secret" (merge (dict "secretName" $s.auth.tokenSecretName "items" (list (dict "key" "tokens" "path" "tokens"))) $secret)) -}}
{{- end -}}
{{- if $s.auth.jwt.keys -}}
{{- $volumes = append $volumes (dict "name" "jwt-keys" "secret" (merge (dict "secretName" $s.auth.jwt.secretName) $secret)) -}}
{{- end -}}
{{- if $s.auth.peerTokenSecretName -}}
{{- $volumes = append $volumes (dict "name" "peer-token" "secret" (merge (dict "secretName" $s.auth.peerTokenSecretName "items" (list (dict "key" "token" "path" "token"))) $secret)) -}}
{{- end -}}
{{- if and $s.authorization.enabled $s.authorization.acls -}}
{{- $volumes = append $volumes (dict "name" "acls" "configMap" (merge (dict "name" (include "conduit.aclConfigMapName" .)) $secret)) -}}
{{- end -}}
{{- toYaml $volumes -}}
{{- end -}}

{{/* The container's mounts of those volumes, read-only (a YAML list). */}}
{{- define "conduit.securityVolumeMounts" -}}
{{- $dir := include "conduit.securityDir" . -}}
{{- $paths := dict "tls" "tls" "auth-tokens" "tokens" "jwt-keys" "jwt" "peer-token" "peer-token" "acls" "acls" -}}
{{- $mounts := list -}}
{{- range $v := include "conduit.securityVolumes" . | fromYamlArray -}}
{{- $mounts = append $mounts (dict "name" $v.name "mountPath" (printf "%s/%s" $dir (index $paths $v.name)) "readOnly" true) -}}
{{- end -}}
{{- toYaml $mounts -}}
{{- end -}}

{{/*
grpcurl and its transport arguments for a port-forward to one service (NOTES.txt): plaintext, or
TLS trusting ca.crt and checking the client Service's name, with a client certificate unless
clientAuth is none. Call with (dict "root" $ "v" <service values>).
*/}}
{{- define "conduit.grpcurl" -}}
{{- $tls := .root.Values.security.tls -}}
{{- if $tls.enabled -}}
grpcurl -cacert ca.crt -servername {{ .v.objectName }}.{{ .root.Release.Namespace }}.svc
{{- if ne $tls.clientAuth "none" }} -cert client.crt -key client.key{{ end }}
{{- else -}}
grpcurl -plaintext
{{- end -}}
{{- end -}}
