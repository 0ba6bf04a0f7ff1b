// Cluster-mode checks of rendered manifests; validate-manifests.js calls them for each case.
//   * checkBroker: with cluster.enabled, every broker pod is broker <ordinal> (--broker_id from the
//     pod-index label) advertised at its stable DNS name through the headless Service, and its
//     --etcd_endpoints are every member of the rendered etcd StatefulSet or exactly
//     etcd.endpoints; without it, no cluster flag at all.
//   * checkEtcd: the in-chart etcd bootstraps: members started in parallel, named by their pods,
//     --initial-cluster listing each ordinal's peer URL under the headless Service (which
//     publishes not-ready members), advertised URLs on the container's ports, data on the volume.
//   * checkBudgets: PodDisruptionBudgets exactly where they protect something. A single-replica
//     StatefulSet has none (maxUnavailable 1 would let its one pod go anyway; minAvailable 1
//     would hang every node drain). Every budget selects one StatefulSet of several pods, lets at
//     least one of them go, and is the one the case expects: the brokers' default maxUnavailable 1
//     (one broker at a time: replication factor 3, min in-sync 2) unless the values override it,
//     etcd's (members - 1) / 2, which keeps a quorum.
'use strict';

// scripts/check-deploy.sh renders every case with --namespace conduit.
const NAMESPACE = 'conduit';
const POD_INDEX_LABEL = "metadata.labels['apps.kubernetes.io/pod-index']";

function fieldRefOf(container, env) {
  const e = (container.env || []).find((x) => x.name === env);
  return e && e.valueFrom && e.valueFrom.fieldRef && e.valueFrom.fieldRef.fieldPath;
}

function portOf(container, name) {
  return (container.ports.find((p) => p.name === name) || {}).containerPort;
}

function podDns(set, pod) {
  return `${pod}.${set.spec.serviceName}.${NAMESPACE}.svc`;
}

const ordinals = (set) => [...Array(set.spec.replicas).keys()];

// flagValue(name): the broker's flag file value or undefined; values: the case's values file.
function checkBroker(report, set, flagValue, { sets, values, serverFlags }) {
  const where = `StatefulSet/${set.metadata.name}`;
  const c = set.spec.template.spec.containers[0];
  const args = c.args || [];
  const cluster = values.cluster && values.cluster.enabled;
  if (!cluster) {
    report.check(!args.length && !flagValue('etcd_endpoints') && !flagValue('broker_id'),
      `${where}: cluster flags rendered without cluster.enabled`);
    return;
  }
  for (const a of args) {
    const m = a.match(/^--([a-z0-9_]+)=/);
    report.check(m && serverFlags.has(m[1]), `${where}: argument ${a} is not a --flag=value the servers define`);
  }
  report.check(args.includes('--broker_id=$(POD_INDEX)') && fieldRefOf(c, 'POD_INDEX') === POD_INDEX_LABEL,
    `${where}: --broker_id must be $(POD_INDEX), the env var of the pod's ${POD_INDEX_LABEL}`);
  const advertised = `--advertise_address=${podDns(set, '$(POD_NAME)')}:${portOf(c, 'grpc')}`;
  report.check(args.includes(advertised) && fieldRefOf(c, 'POD_NAME') === 'metadata.name',
    `${where}: expected ${advertised} (POD_NAME from metadata.name)`);
  const etcd = sets.find((s) => s.spec.template.metadata.labels['app.kubernetes.io/component'] === 'etcd');
  const expected = etcd
    ? ordinals(etcd).map((i) => `${podDns(etcd, `${etcd.metadata.name}-${i}`)}:${portOf(etcd.spec.template.spec.containers[0], 'client')}`)
    : (values.etcd && values.etcd.endpoints) || [];
  report.check(expected.length > 0 && flagValue('etcd_endpoints') === expected.join(','),
    `${where}: --etcd_endpoints=${flagValue('etcd_endpoints')}, expected ${expected.join(',') || 'some etcd'}`);
  report.check(/^[A-Za-z0-9._-]+$/.test(flagValue('cluster_name') || ''), `${where}: no --cluster_name`);
  report.check(/^[0-9.]+(ms|s|m|h)$/.test(flagValue('etcd_lease_ttl') || ''), `${where}: no --etcd_lease_ttl`);
}

function checkEtcd(report, set, services) {
  const where = `StatefulSet/${set.metadata.name}`;
  const name = set.metadata.name;
  const c = set.spec.template.spec.containers[0];
  const command = c.command || [];
  const arg = (n) => (command.find((a) => a.startsWith(`--${n}=`)) || '').slice(n.length + 3);
  const client = portOf(c, 'client');
  const peer = portOf(c, 'peer');
  report.check(command[0] === 'etcd', `${where}: runs ${command[0]}, expected etcd`);
  report.check(set.spec.replicas % 2 === 1, `${where}: ${set.spec.replicas} members; an odd count keeps a majority`);
  report.check(set.spec.podManagementPolicy === 'Parallel',
    `${where}: members must start in parallel (a member is not ready until a quorum is)`);
  const headless = services.find((s) => s.metadata.name === set.spec.serviceName);
  report.check(headless && headless.spec.publishNotReadyAddresses === true,
    `${where}: the headless Service must publish not-ready members (peers resolve them while bootstrapping)`);
  report.check(arg('name') === '$(POD_NAME)' && fieldRefOf(c, 'POD_NAME') === 'metadata.name',
    `${where}: --name must be $(POD_NAME) from metadata.name`);
  const self = podDns(set, '$(POD_NAME)');
  report.check(arg('initial-advertise-peer-urls') === `http://${self}:${peer}`, `${where}: peer URL is not http://${self}:${peer}`);
  report.check(arg('advertise-client-urls') === `http://${self}:${client}`, `${where}: client URL is not http://${self}:${client}`);
  report.check(arg('listen-peer-urls').endsWith(`:${peer}`) && arg('listen-client-urls').endsWith(`:${client}`),
    `${where}: listen URLs are not on the container's peer and client ports`);
  const members = ordinals(set).map((i) => `${name}-${i}=http://${podDns(set, `${name}-${i}`)}:${peer}`);
  report.check(arg('initial-cluster') === members.join(','),
    `${where}: --initial-cluster=${arg('initial-cluster')}, expected ${members.join(',')}`);
  const data = (c.volumeMounts.find((m) => m.name === 'data') || {}).mountPath;
  report.check(data && arg('data-dir').startsWith(data), `${where}: --data-dir is not on the data volume (${data})`);
  const ready = c.readinessProbe && c.readinessProbe.httpGet;
  report.check(ready && ready.path === '/health' && ready.port === 'client', `${where}: readiness must GET /health on the client port`);
  report.check(c.livenessProbe, `${where}: no liveness probe`);
}

// Pods an intstr (an integer or "N%") stands for out of `replicas`, rounded up as the disruption
// controller does for both fields.
function scaled(value, replicas) {
  if (typeof value === 'string' && /^[0-9]+%$/.test(value)) return Math.ceil((parseInt(value, 10) * replicas) / 100);
  return value;
}

// The budget each component must get at `replicas` pods: null for none. `overrides`: the case's
// expected broker budget when its values set one ({minAvailable: 4}).
function expectedBudget(component, replicas, overrides) {
  if (replicas <= 1) return null;
  if (component === 'etcd') return { maxUnavailable: Math.floor((replicas - 1) / 2) };
  return (overrides && overrides[component]) || { maxUnavailable: 1 };
}

// budgets: every PodDisruptionBudget rendered; sets: every StatefulSet; overrides as above.
function checkBudgets(report, budgets, sets, overrides) {
  const component = (s) => s.spec.template.metadata.labels['app.kubernetes.io/component'];
  const selects = (pdb, s) => Object.entries(pdb.spec.selector.matchLabels || {})
    .every(([k, v]) => s.spec.template.metadata.labels[k] === v);
  for (const s of sets) {
    const mine = budgets.filter((b) => selects(b, s));
    const want = expectedBudget(component(s), s.spec.replicas, overrides);
    const where = `StatefulSet/${s.metadata.name} (${s.spec.replicas} replica${s.spec.replicas === 1 ? '' : 's'})`;
    if (!want) {
      report.check(mine.length === 0, `${where}: a single-replica service must have no PodDisruptionBudget ` +
        `(maxUnavailable 1 protects nothing, minAvailable 1 hangs every node drain), has ${mine.map((b) => b.metadata.name)}`);
      continue;
    }
    if (!report.check(mine.length === 1, `${where}: ${mine.length} PodDisruptionBudgets, expected 1`)) continue;
    const spec = mine[0].spec;
    const got = {};
    for (const k of ['maxUnavailable', 'minAvailable']) if (spec[k] !== undefined) got[k] = spec[k];
    report.check(JSON.stringify(got) === JSON.stringify(want),
      `${where}: budget ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
    const mayGo = spec.minAvailable !== undefined
      ? s.spec.replicas - scaled(spec.minAvailable, s.spec.replicas)
      : scaled(spec.maxUnavailable, s.spec.replicas);
    report.check(mayGo >= 1, `${where}: its budget lets no pod go, so every node drain would hang`);
    if (component(s) === 'etcd') {
      const quorum = Math.floor(s.spec.replicas / 2) + 1;
      report.check(s.spec.replicas - mayGo >= quorum,
        `${where}: the budget lets ${mayGo} members go, leaving fewer than a quorum of ${quorum}`);
    }
    report.check(spec.unhealthyPodEvictionPolicy === undefined || spec.unhealthyPodEvictionPolicy === 'AlwaysAllow',
      `${where}: unhealthyPodEvictionPolicy ${spec.unhealthyPodEvictionPolicy}: a crash-looping pod must not block drains`);
  }
  for (const b of budgets) {
    report.check(sets.filter((s) => selects(b, s)).length === 1,
      `PodDisruptionBudget/${b.metadata.name} selects ${sets.filter((s) => selects(b, s)).length} StatefulSets' pods, expected 1`);
  }
}

module.exports = { checkBroker, checkEtcd, checkBudgets };
