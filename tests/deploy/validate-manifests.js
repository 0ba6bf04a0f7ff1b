// Validates `helm template` output offline (scripts/check-deploy.sh).
//
// Usage: node validate-manifests.js CASE=FILE.yaml ...
// CASE names the values combination (tests/deploy/values/CASE.yaml; "default" for none) and
// selects what must be rendered. For every document:
//   * the Kubernetes (kubernetes-models) or Prometheus Operator (@kubernetes-models/
//     prometheus-operator) schema of its apiVersion/kind: types and required fields;
//   * for pods: non-root, read-only root filesystem, no privilege escalation, all capabilities
//     dropped, RuntimeDefault seccomp, resources, gRPC probes (readiness on the service's own
//     health name; tcpSocket with TLS), a pinned image, a binary CMake defines (a pending one only in a case marked
//     pendingBinaries; none is today), flag files naming only flags the servers define, and
//     the coordinator's --broker_address naming the broker client Service's gRPC port, the
//     queue's --bridge_bootstrap and --bridge_coordinator the broker's and the coordinator's;
//   * references: StatefulSet → headless Service, ConfigMap, ServiceAccount; Services select
//     pods that exist, target ports the container declares; the ServiceMonitor selects the
//     client Services by their metrics port;
//   * PodDisruptionBudgets only for StatefulSets of several pods, none for a single replica, each
//     letting a pod go, the brokers' as each case expects (default maxUnavailable 1), etcd's
//     keeping a quorum (check-cluster-manifests.js, checkBudgets);
//   * the metrics port's scheme as each case expects (metricsScheme, default http): every flag
//     file has --metrics_tls_cert and --metrics_tls_key exactly when it is https, the
//     ServiceMonitor scrapes with that scheme (and its tlsConfig: check-security-manifests.js),
//     and the Services' metrics ports declare it as appProtocol;
//   * PrometheusRule groups equal deploy/prometheus/rules/, the dashboard ConfigMap equals
//     deploy/grafana/dashboards/conduit.json;
//   * cluster mode (tests/deploy/check-cluster-manifests.js): broker identities and etcd
//     endpoints, and the in-chart etcd's bootstrap; replica counts as each case expects.
//   * security (tests/deploy/check-security-manifests.js): TLS, token, JWT and peer flags naming
//     files of read-only Secret mounts, the ACL ConfigMap's file equal to the values' entries,
//     quotas; no security flag or mount the values do not ask for; with TLS, tcpSocket probes.
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const {
  ROOT, conduitBinaries, serverFlags, PENDING_BINARIES, Report,
} = require('./repo_facts');
const { checkBroker, checkEtcd, checkBudgets } = require('./check-cluster-manifests');
const { checkSecurity, checkServiceMonitor, metricsScheme } = require('./check-security-manifests');

const HEALTH = {
  broker: 'conduit.log.v1.LogService',
  coordinator: 'conduit.coordinator.v1.GroupCoordinator',
  queue: 'conduit.queue.v1.WorkQueue',
  standalone: 'conduit.log.v1.LogService',
};

// What each values combination must render: the services (StatefulSets), the monitoring kinds,
// the replica counts other than 1 (cluster mode; etcd: the in-chart etcd StatefulSet), the
// metrics port's scheme when it is not http (security.tls.metrics) and the brokers'
// PodDisruptionBudget when the values set one (budgets; default: maxUnavailable 1 for several
// brokers, none for one).
const EXPECT = {
  default: { services: ['broker', 'coordinator', 'queue'], monitoring: false },
  standalone: { services: ['standalone'], monitoring: false },
  monitoring: { services: ['broker', 'coordinator', 'queue'], monitoring: true },
  'standalone-monitoring': { services: ['standalone'], monitoring: true },
  'all-services': { services: ['broker', 'coordinator', 'queue'], monitoring: true },
  hardened: { services: ['broker', 'coordinator', 'queue'], monitoring: false },
  cluster: { services: ['broker', 'coordinator', 'queue'], monitoring: true, replicas: { broker: 3, etcd: 3 } },
  'cluster-external-etcd': {
    services: ['broker', 'coordinator', 'queue'], monitoring: false, replicas: { broker: 5 },
    budgets: { broker: { minAvailable: 4 } },
  },
  'cluster-large': { services: ['broker', 'coordinator', 'queue'], monitoring: false, replicas: { broker: 5, etcd: 5 } },
  'cluster-single': { services: ['broker', 'coordinator', 'queue'], monitoring: false, replicas: { broker: 1, etcd: 1 } },
  secure: { services: ['broker', 'coordinator', 'queue'], monitoring: true, metricsScheme: 'https' },
  'secure-cluster': { services: ['broker', 'coordinator', 'queue'], monitoring: true, replicas: { broker: 3, etcd: 3 } },
  'tls-only': { services: ['standalone'], monitoring: true, metricsScheme: 'https' },
};

// The values file of a case ({} for default).
function caseValues(name) {
  const file = path.join(ROOT, 'tests/deploy/values', `${name}.yaml`);
  return fs.existsSync(file) ? YAML.parse(fs.readFileSync(file, 'utf8')) || {} : {};
}

function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const candidates = group === 'monitoring.coreos.com'
    ? [`@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`]
    : [group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`];
  for (const c of candidates) {
    try {
      return require(c)[kind];
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  return null;
}

// JSON with sorted keys: Helm's toYaml sorts map keys.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

function matches(selector, labels) {
  return Object.entries(selector || {}).every(([k, v]) => labels && labels[k] === v);
}

const binaries = conduitBinaries();
const flags = serverFlags();
const deployRules = ['conduit.rules.yml', 'conduit-pending.rules.yml'].map(
  (f) => YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy/prometheus/rules', f), 'utf8')).groups);
const dashboardJson = fs.readFileSync(path.join(ROOT, 'deploy/grafana/dashboards/conduit.json'), 'utf8');

let total = 0;
const summary = [];
let failed = false;

for (const arg of process.argv.slice(2)) {
  const [name, file] = arg.split('=');
  const expect = EXPECT[name];
  const report = new Report(`chart[${name}]`);
  if (!expect) {
    report.fail(`no expectations for case ${name} in validate-manifests.js`);
  }
  const values = caseValues(name);
  const scheme = (expect && expect.metricsScheme) || 'http';
  report.check(metricsScheme(values) === scheme,
    `the values serve metrics over ${metricsScheme(values)}, but the case expects ${scheme}`);
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'))
    .map((d) => d.toJS()).filter((d) => d && Object.keys(d).length);
  const byKind = {};
  for (const d of docs) (byKind[d.kind] = byKind[d.kind] || []).push(d);
  const kinds = (k) => byKind[k] || [];

  // 1. Schemas.
  for (const d of docs) {
    const where = `${d.kind}/${d.metadata && d.metadata.name}`;
    const Model = modelFor(d.apiVersion, d.kind);
    if (!report.check(Model, `${where}: no schema for ${d.apiVersion} ${d.kind}`)) continue;
    try {
      new Model(d).validate();
    } catch (e) {
      report.fail(`${where}: ${e.message}`);
    }
  }

  // 2. Services rendered.
  const sets = kinds('StatefulSet');
  const components = sets.map((s) => s.spec.template.metadata.labels['app.kubernetes.io/component']).sort();
  const replicas = (expect && expect.replicas) || {};
  if (expect) {
    const want = [...expect.services, ...(replicas.etcd ? ['etcd'] : [])].sort();
    report.check(JSON.stringify(components) === JSON.stringify(want),
      `StatefulSets for [${components}], expected [${want}]`);
    for (const kind of ['ServiceMonitor', 'PrometheusRule']) {
      report.check((kinds(kind).length === 1) === expect.monitoring,
        `${kinds(kind).length} ${kind}, expected ${expect.monitoring ? 1 : 0}`);
    }
  }

  // 3. Pods.
  const configMaps = new Map(kinds('ConfigMap').map((c) => [c.metadata.name, c]));
  const services = kinds('Service');
  for (const s of sets) {
    const where = `StatefulSet/${s.metadata.name}`;
    const component = s.spec.template.metadata.labels['app.kubernetes.io/component'];
    const pod = s.spec.template.spec;
    const podLabels = s.spec.template.metadata.labels;
    const wantReplicas = replicas[component] || 1;
    report.check(s.spec.replicas === wantReplicas, `${where}: ${s.spec.replicas} replicas, expected ${wantReplicas}`);
    report.check(matches(s.spec.selector.matchLabels, podLabels), `${where}: selector does not match its pods`);
    const headless = services.find((x) => x.metadata.name === s.spec.serviceName);
    report.check(headless && headless.spec.clusterIP === 'None', `${where}: serviceName ${s.spec.serviceName} is not a headless Service`);
    if (!kinds('ServiceAccount').length) {
      report.fail(`${where}: no ServiceAccount rendered`);
    } else {
      report.check(kinds('ServiceAccount').some((a) => a.metadata.name === pod.serviceAccountName),
        `${where}: ServiceAccount ${pod.serviceAccountName} is not rendered`);
    }
    const psc = pod.securityContext || {};
    report.check(psc.runAsNonRoot === true && psc.runAsUser > 0, `${where}: pod must run as non-root`);
    report.check(psc.seccompProfile && psc.seccompProfile.type === 'RuntimeDefault', `${where}: seccomp RuntimeDefault`);
    report.check(pod.automountServiceAccountToken === false, `${where}: automountServiceAccountToken must be false`);
    report.check(pod.containers.length === 1, `${where}: one container expected`);
    const c = pod.containers[0];
    const csc = c.securityContext || {};
    report.check(csc.readOnlyRootFilesystem === true, `${where}: readOnlyRootFilesystem`);
    report.check(csc.allowPrivilegeEscalation === false, `${where}: allowPrivilegeEscalation false`);
    report.check(csc.capabilities && (csc.capabilities.drop || []).includes('ALL'), `${where}: capabilities drop ALL`);
    report.check(c.resources && c.resources.requests && c.resources.requests.cpu && c.resources.requests.memory,
      `${where}: cpu and memory requests`);
    report.check(!/:latest$/.test(c.image) && /:[^/]+$/.test(c.image), `${where}: image ${c.image} is not pinned`);
    // Volumes: data (PVC template or emptyDir), the flag file (Conduit), /tmp.
    const mounts = new Map(c.volumeMounts.map((m) => [m.name, m.mountPath]));
    report.check(mounts.get('tmp') === '/tmp', `${where}: an emptyDir must mount at /tmp (read-only root)`);
    const claims = (s.spec.volumeClaimTemplates || []).map((v) => v.metadata.name);
    const podVolumes = (pod.volumes || []).map((v) => v.name);
    report.check(mounts.has('data'), `${where}: no data volume mounted`);
    for (const m of mounts.keys()) {
      report.check(claims.includes(m) || podVolumes.includes(m), `${where}: mount ${m} has no volume`);
    }
    if (component === 'etcd') {
      checkEtcd(report, s, services);
      continue;
    }
    const binary = c.command[0];
    if (binaries.has(binary)) {
      // ok
    } else if (PENDING_BINARIES.has(binary)) {
      report.check(expect && expect.pendingBinaries, `${where}: ${binary} is not built yet; only a case marked pendingBinaries may render it`);
    } else {
      report.fail(`${where}: runs ${binary}, which no CMakeLists.txt defines`);
    }
    const grpcPort = (c.ports.find((p) => p.name === 'grpc') || {}).containerPort;
    report.check(mounts.get('data') === '/var/lib/conduit', `${where}: data must mount at /var/lib/conduit`);
    let tls = false;
    const flagVolume = pod.volumes.find((v) => v.name === 'flags');
    const cm = flagVolume && configMaps.get(flagVolume.configMap.name);
    if (report.check(cm, `${where}: flag ConfigMap ${flagVolume && flagVolume.configMap.name} is not rendered`)) {
      report.check(c.command.includes('--flagfile=/etc/conduit/flags') && mounts.get('flags') === '/etc/conduit',
        `${where}: must read --flagfile=/etc/conduit/flags from the ConfigMap`);
      const lines = cm.data.flags.split('\n').filter((l) => l.trim());
      const seen = new Set();
      for (const l of lines) {
        const m = l.match(/^--([a-z0-9_]+)=(.*)$/);
        if (report.check(m, `${cm.metadata.name}: "${l}" is not --name=value`)) {
          report.check(flags.has(m[1]), `${cm.metadata.name}: flag --${m[1]} is not defined by the servers`);
          report.check(!seen.has(m[1]), `${cm.metadata.name}: flag --${m[1]} is set twice`);
          seen.add(m[1]);
        }
      }
      const value = (n) => (lines.find((l) => l.startsWith(`--${n}=`)) || '').split('=')[1];
      const whole = (n) => {
        const l = lines.find((x) => x.startsWith(`--${n}=`));
        return l === undefined ? undefined : l.slice(n.length + 3);
      };
      tls = checkSecurity(report, s, whole, { values, configMaps, services });
      for (const f of ['metrics_tls_cert', 'metrics_tls_key']) {
        report.check((whole(f) !== undefined) === (scheme === 'https'),
          `${cm.metadata.name}: --${f}=${whole(f)}, but the metrics port is to serve ${scheme}`);
      }
      report.check(value('data_dir') === '/var/lib/conduit', `${cm.metadata.name}: --data_dir must be the volume`);
      report.check((value('listen') || '').endsWith(`:${grpcPort}`), `${cm.metadata.name}: --listen port is not the container's grpc port`);
      const metricsPort = (c.ports.find((p) => p.name === 'metrics') || {}).containerPort;
      report.check((value('metrics_listen') || '').endsWith(`:${metricsPort}`), `${cm.metadata.name}: --metrics_listen port is not the container's metrics port`);
      if (component === 'broker') {
        checkBroker(report, s, value, { sets, values, serverFlags: flags });
      }
      if (component === 'coordinator') {
        // The broker it asks: this release's broker client Service (only ready pods), gRPC port.
        const broker = services.find((x) => x.spec.clusterIP !== 'None' &&
          x.metadata.labels['app.kubernetes.io/component'] === 'broker');
        const address = value('broker_address') || '';
        if (report.check(broker, `${where}: the coordinator needs a broker, and none is rendered`)) {
          const port = (broker.spec.ports.find((p) => p.name === 'grpc') || {}).port;
          const m = address.match(/^([^:]+):(\d+)$/);
          report.check(m && m[1].split('.')[0] === broker.metadata.name && Number(m[2]) === port,
            `${cm.metadata.name}: --broker_address=${address}, expected the broker Service ${broker.metadata.name}:${port}`);
        }
      }
      if (component === 'queue') {
        // Its bridges read from this release's broker and join groups at its coordinator (the
        // client Services, gRPC port); without them they would ask the queue itself for a log.
        for (const [flag, target] of [['bridge_bootstrap', 'broker'], ['bridge_coordinator', 'coordinator']]) {
          const svc = services.find((x) => x.spec.clusterIP !== 'None' &&
            x.metadata.labels['app.kubernetes.io/component'] === target);
          if (!svc) continue;
          const port = (svc.spec.ports.find((p) => p.name === 'grpc') || {}).port;
          const m = (value(flag) || '').match(/^([^:]+):(\d+)$/);
          report.check(m && m[1].split('.')[0] === svc.metadata.name && Number(m[2]) === port,
            `${cm.metadata.name}: --${flag}=${value(flag)}, expected the ${target} Service ${svc.metadata.name}:${port}`);
        }
      }
    }
    // Probes: the kubelet's gRPC probe on the gRPC port (readiness on the service's own health
    // name); with TLS, which that probe cannot speak, tcpSocket on the gRPC port.
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const p = c[probe];
      if (tls) {
        report.check(p && !p.grpc && p.tcpSocket && p.tcpSocket.port === grpcPort,
          `${where}: ${probe} must be a tcpSocket probe on port ${grpcPort} (TLS: the kubelet's gRPC probe has no TLS)`);
      } else {
        report.check(p && p.grpc && p.grpc.port === grpcPort, `${where}: ${probe} must be a gRPC probe on port ${grpcPort}`);
      }
    }
    if (!tls && c.readinessProbe && c.readinessProbe.grpc) {
      report.check(c.readinessProbe.grpc.service === HEALTH[component],
        `${where}: readiness asks for ${c.readinessProbe.grpc.service}, expected ${HEALTH[component]}`);
    }
  }

  // 4. Services and budgets select pods; target ports exist.
  const podsOf = (selector) => sets.filter((s) => matches(selector, s.spec.template.metadata.labels));
  for (const svc of services) {
    const where = `Service/${svc.metadata.name}`;
    const targets = podsOf(svc.spec.selector);
    report.check(targets.length === 1, `${where}: selects ${targets.length} StatefulSets' pods, expected 1`);
    for (const p of svc.spec.ports) {
      report.check(targets.every((s) => s.spec.template.spec.containers[0].ports.some((cp) => cp.name === p.targetPort)),
        `${where}: targetPort ${p.targetPort} is not a container port`);
      if (p.name === 'metrics') {
        report.check(p.appProtocol === scheme, `${where}: metrics port appProtocol ${p.appProtocol}, expected ${scheme}`);
      }
    }
  }
  checkBudgets(report, kinds('PodDisruptionBudget'), sets, expect && expect.budgets);

  // 5. Monitoring.
  for (const sm of kinds('ServiceMonitor')) {
    const selected = services.filter((s) => matches(sm.spec.selector.matchLabels, s.metadata.labels));
    const conduitSets = sets.filter((s) => s.spec.template.metadata.labels['app.kubernetes.io/component'] !== 'etcd');
    report.check(selected.length === conduitSets.length && selected.every((s) => s.spec.clusterIP !== 'None'),
      `ServiceMonitor selects ${selected.length} Services, expected the ${conduitSets.length} Conduit client Services`);
    for (const s of selected) {
      report.check(sm.spec.endpoints.every((e) => s.spec.ports.some((p) => p.name === e.port)),
        `ServiceMonitor endpoint port missing on ${s.metadata.name}`);
      report.check(/^conduit-(broker|coordinator|queue|standalone)$/.test(s.metadata.labels[sm.spec.jobLabel] || ''),
        `${s.metadata.name}: job label ${sm.spec.jobLabel} must name the job the alert rules use`);
    }
    report.check(sm.spec.endpoints.every((e) => e.scheme === scheme),
      `ServiceMonitor scrapes ${sm.spec.endpoints.map((e) => e.scheme)}, expected ${scheme}`);
    checkServiceMonitor(report, sm, { values, services: selected });
  }
  for (const rule of kinds('PrometheusRule')) {
    const expected = [...deployRules[0], ...deployRules[1]];
    report.check(canonical(rule.spec.groups) === canonical(expected),
      'PrometheusRule groups differ from deploy/prometheus/rules/*.yml');
  }
  const dashboards = kinds('ConfigMap').filter((c) => c.data && c.data['conduit.json']);
  if (expect) {
    report.check(dashboards.length === (expect.monitoring ? 1 : 0), `${dashboards.length} dashboard ConfigMaps`);
  }
  for (const d of dashboards) {
    report.check(d.data['conduit.json'] === dashboardJson.replace(/\n$/, ''), 'dashboard ConfigMap differs from deploy/grafana/dashboards/conduit.json');
  }

  total += docs.length;
  const counts = Object.entries(byKind).map(([k, v]) => `${v.length} ${k}`).join(', ');
  summary.push(`${name}: ${docs.length} (${counts})${scheme === 'https' ? '; metrics over https' : ''}`);
  if (report.failures.length) {
    failed = true;
    for (const f of report.failures) console.error(`FAIL ${report.name}: ${f}`);
  }
}

if (failed) process.exit(1);
console.log(`ok manifests: ${total} documents valid against the Kubernetes and Prometheus Operator schemas`);
for (const s of summary) console.log(`   ${s}`);
