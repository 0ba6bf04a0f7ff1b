// Security checks of rendered manifests (values security.*); validate-manifests.js calls
// checkSecurity for each Conduit StatefulSet with the case's values.
//   * off (every case without a security block): no security flag, no volume or mount under
//     /etc/conduit-security;
//   * tls.enabled: --tls_cert and --tls_key are tls.crt and tls.key of a read-only, whole-directory
//     mount (a subPath mount never sees a renewal) of the Secret tls.secretName; --tls_client_auth
//     as set, --tls_client_ca that Secret's ca.crt unless none; the servers dial each other with
//     --peer_tls_ca ca.crt and, with require, present tls.crt/tls.key (--peer_tls_cert/_key);
//     conduit-standalone's coordinator dials its client Service by name;
//   * tls.metrics (with tls.enabled): --metrics_tls_cert and --metrics_tls_key are the same
//     tls.crt and tls.key, and with require --metrics_tls_client_ca that Secret's ca.crt;
//     checkServiceMonitor: the ServiceMonitor then scrapes https trusting the Secret's ca.crt,
//     checking a client Service's name (one the certificate must carry), presenting tls.crt and
//     tls.key with require only; without tls.metrics it scrapes http with no tlsConfig
//     (validate-manifests.js: the Services' metrics ports declare appProtocol https or http);
//   * tokens, JWT keys and the peer token: each flag names a key of its Secret through a
//     read-only mount; JWT issuer and audience as set;
//   * authorization: --authorization=true, --superusers as listed, and --acl_file names the key
//     `acls` of the rendered ACL ConfigMap, whose entries are valid ACL file lines equal, in
//     order, to security.authorization.acls;
//   * quotas and the reload interval as set.
// It returns whether the pod serves TLS, for the probe checks (tcpSocket with TLS, else gRPC).
'use strict';

// scripts/check-deploy.sh renders every case with --namespace conduit.
const NAMESPACE = 'conduit';
const SECURITY_DIR = '/etc/conduit-security';

// Every flag the security values own; none may appear without its value set.
const SECURITY_FLAGS = [
  'tls_cert', 'tls_key', 'tls_client_ca', 'tls_client_auth', 'tls_refresh_seconds',
  'metrics_tls_cert', 'metrics_tls_key', 'metrics_tls_client_ca',
  'peer_tls_ca', 'peer_tls_cert', 'peer_tls_key', 'peer_token_file',
  'auth_token_file', 'auth_jwt_keys', 'auth_jwt_issuer', 'auth_jwt_audience',
  'authorization', 'acl_file', 'superusers', 'auth_reload_seconds',
  'quota_produce_bytes', 'quota_fetch_bytes', 'quota_requests',
];

// The ACL file grammar (common/security/README.md, "File formats"; acl.cc's names).
const ACL = {
  permissions: ['allow', 'deny'],
  resourceTypes: ['topic', 'group', 'queue', 'cluster'],
  patternTypes: ['literal', 'prefixed', 'any'],
  operations: ['Read', 'Write', 'Create', 'Delete', 'Alter', 'Describe', 'Redrive', 'ViewPayload'],
};

// Problems of one ACL file line, [] when it parses as the servers parse it.
function aclLineProblems(line) {
  const f = line.split(/[ \t]+/);
  if (f.length !== 6) return [`${f.length} fields, expected 6`];
  const [permission, principal, type, pattern, name, ops] = f;
  const problems = [];
  if (!ACL.permissions.includes(permission.toLowerCase())) problems.push(`permission ${permission}`);
  if (principal !== '*' && !/^[^\s:]+:\S+$/.test(principal)) problems.push(`principal ${principal}`);
  if (!ACL.resourceTypes.includes(type.toLowerCase())) problems.push(`resource type ${type}`);
  if (!ACL.patternTypes.includes(pattern.toLowerCase())) problems.push(`pattern ${pattern}`);
  if ((pattern.toLowerCase() === 'any') !== (name === '*')) problems.push(`name ${name} with pattern ${pattern}`);
  for (const op of ops.split(',')) {
    if (!ACL.operations.some((o) => o.toLowerCase() === op.toLowerCase())) problems.push(`operation ${op}`);
  }
  return problems;
}

// The file a flag names: the container's mount holding it, that mount's pod volume and the key
// the file shows (a Secret's or ConfigMap's item projected at that path, or the path itself).
function fileSource(pod, container, file) {
  const mount = (container.volumeMounts || []).find((m) => file && file.startsWith(`${m.mountPath}/`));
  if (!mount) return null;
  const volume = (pod.volumes || []).find((v) => v.name === mount.name);
  if (!volume) return null;
  const rel = file.slice(mount.mountPath.length + 1);
  const source = volume.secret || volume.configMap;
  const item = source && source.items ? source.items.find((i) => i.path === rel) : null;
  return {
    mount, volume, key: source && source.items ? (item && item.key) : rel,
  };
}

// Checks that flag `flag` names key `key` of the Secret `secretName` through a read-only
// whole-directory mount.
function checkSecretFile(report, where, ctx, flag, secretName, key) {
  const file = ctx.flagValue(flag);
  const src = fileSource(ctx.pod, ctx.container, file);
  if (!report.check(src, `${where}: --${flag}=${file} is on no mounted volume`)) return;
  report.check(src.volume.secret && src.volume.secret.secretName === secretName,
    `${where}: --${flag}=${file} is not in the Secret ${secretName} (volume ${src.volume.name})`);
  report.check(src.key === key, `${where}: --${flag}=${file} shows key ${src.key}, expected ${key}`);
  report.check(src.mount.readOnly === true && !src.mount.subPath,
    `${where}: mount ${src.mount.name} must be read-only and whole (no subPath: Secret updates must reach it)`);
}

// `set`: a Conduit StatefulSet; flagValue(name): its flag file's value (everything after the
// first '=') or undefined; values: the case's values; configMaps: name → ConfigMap; services:
// the rendered Services.
// Returns whether TLS is on.
function checkSecurity(report, set, flagValue, { values, configMaps, services }) {
  const where = `StatefulSet/${set.metadata.name}`;
  const pod = set.spec.template.spec;
  const container = pod.containers[0];
  const component = set.spec.template.metadata.labels['app.kubernetes.io/component'];
  const ctx = { pod, container, flagValue };
  const security = values.security || {};
  const tls = security.tls || {};
  const auth = security.auth || {};
  const jwt = auth.jwt || {};
  const authz = security.authorization || {};
  const quotas = security.quotas || {};
  const expected = new Set();
  const expectFlag = (flag, want) => {
    expected.add(flag);
    report.check(flagValue(flag) === want, `${where}: --${flag}=${flagValue(flag)}, expected ${want}`);
  };

  if (tls.enabled) {
    const clientAuth = tls.clientAuth || 'none';
    const file = (flag, key) => {
      expected.add(flag);
      checkSecretFile(report, where, ctx, flag, tls.secretName, key);
    };
    file('tls_cert', 'tls.crt');
    file('tls_key', 'tls.key');
    file('peer_tls_ca', 'ca.crt');
    if (clientAuth !== 'none') file('tls_client_ca', 'ca.crt');
    if (clientAuth === 'require') {
      file('peer_tls_cert', 'tls.crt');
      file('peer_tls_key', 'tls.key');
    }
    if (tls.metrics) {
      file('metrics_tls_cert', 'tls.crt');
      file('metrics_tls_key', 'tls.key');
      if (clientAuth === 'require') file('metrics_tls_client_ca', 'ca.crt');
    }
    expectFlag('tls_client_auth', clientAuth);
    expectFlag('tls_refresh_seconds', String(tls.refreshSeconds || 60));
    if (component === 'standalone') {
      // Its coordinator must reach the log service at a name the certificate holds.
      const client = services.find((s) => s.spec.clusterIP !== 'None' &&
        s.metadata.labels['app.kubernetes.io/component'] === 'standalone');
      const port = client && (client.spec.ports.find((p) => p.name === 'grpc') || {}).port;
      const want = client && `${client.metadata.name}.${NAMESPACE}.svc:${port}`;
      report.check(client && flagValue('broker_address') === want,
        `${where}: with TLS --broker_address=${flagValue('broker_address')}, expected the client Service ${want}`);
    }
  }
  if (auth.tokenSecretName) {
    expected.add('auth_token_file');
    checkSecretFile(report, where, ctx, 'auth_token_file', auth.tokenSecretName, 'tokens');
  }
  if (auth.peerTokenSecretName) {
    expected.add('peer_token_file');
    checkSecretFile(report, where, ctx, 'peer_token_file', auth.peerTokenSecretName, 'token');
  }
  if ((jwt.keys || []).length) {
    expected.add('auth_jwt_keys');
    const specs = (flagValue('auth_jwt_keys') || '').split(',');
    report.check(specs.length === jwt.keys.length,
      `${where}: --auth_jwt_keys has ${specs.length} keys, expected ${jwt.keys.length}`);
    jwt.keys.forEach((k, i) => {
      const [alg, file] = (specs[i] || '').split(/:(.*)/s);
      report.check(alg === k.algorithm, `${where}: JWT key ${i} has algorithm ${alg}, expected ${k.algorithm}`);
      const src = fileSource(pod, container, file);
      report.check(src && src.volume.secret && src.volume.secret.secretName === jwt.secretName &&
        src.key === k.key && src.mount.readOnly === true,
      `${where}: JWT key ${file} is not key ${k.key} of the Secret ${jwt.secretName}, mounted read-only`);
    });
    expectFlag('auth_jwt_issuer', jwt.issuer);
    expectFlag('auth_jwt_audience', jwt.audience);
  }
  if (authz.enabled) {
    expectFlag('authorization', 'true');
    if ((authz.superusers || []).length) expectFlag('superusers', authz.superusers.join(','));
    const acls = authz.acls || [];
    if (acls.length) {
      expected.add('acl_file');
      const file = flagValue('acl_file');
      const src = fileSource(pod, container, file);
      const cm = src && src.volume.configMap && configMaps.get(src.volume.configMap.name);
      if (report.check(cm, `${where}: --acl_file=${file} is on no rendered ConfigMap's volume`)) {
        report.check(src.mount.readOnly === true && !src.mount.subPath,
          `${where}: the ACL mount must be read-only and whole (the servers reload the file)`);
        const text = (cm.data || {})[src.key];
        if (report.check(typeof text === 'string', `${where}: ConfigMap ${cm.metadata.name} has no key ${src.key}`)) {
          const lines = text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
          for (const l of lines) {
            const problems = aclLineProblems(l);
            report.check(!problems.length, `${cm.metadata.name}: "${l}" is no ACL file line (${problems.join(', ')})`);
          }
          const want = acls.map((a) => [a.permission, a.principal, a.resourceType, a.patternType,
            a.name || '*', a.operations.join(',')].join(' '));
          report.check(JSON.stringify(lines) === JSON.stringify(want),
            `${cm.metadata.name}: ACL file\n  ${lines.join('\n  ')}\nexpected\n  ${want.join('\n  ')}`);
        }
      }
    }
  }
  if (auth.tokenSecretName || (authz.enabled && (authz.acls || []).length)) {
    expectFlag('auth_reload_seconds', String(auth.reloadSeconds === undefined ? 10 : auth.reloadSeconds));
  }
  for (const [key, flag] of [['produceBytes', 'quota_produce_bytes'], ['fetchBytes', 'quota_fetch_bytes'], ['requests', 'quota_requests']]) {
    if (quotas[key]) expectFlag(flag, String(quotas[key]));
  }

  // Nothing the values do not ask for.
  for (const flag of SECURITY_FLAGS) {
    if (!expected.has(flag)) {
      report.check(flagValue(flag) === undefined, `${where}: --${flag}=${flagValue(flag)} rendered, but the values do not set it`);
    }
  }
  // Every mount under /etc/conduit-security holds a file some flag names.
  const files = [...expected].flatMap((f) => (f === 'auth_jwt_keys'
    ? (flagValue(f) || '').split(',').map((spec) => spec.slice(spec.indexOf(':') + 1))
    : [flagValue(f)]));
  const used = new Set(files.map((f) => fileSource(pod, container, f)).filter(Boolean).map((x) => x.volume.name));
  for (const m of container.volumeMounts || []) {
    if (m.mountPath.startsWith(`${SECURITY_DIR}/`)) {
      report.check(used.has(m.name), `${where}: mount ${m.name} at ${m.mountPath} is named by no flag`);
    }
  }
  return Boolean(tls.enabled);
}

// The metrics port's scheme for the case's values: https with security.tls.enabled and .metrics.
function metricsScheme(values) {
  const tls = (values.security || {}).tls || {};
  return tls.enabled && tls.metrics ? 'https' : 'http';
}

// The ServiceMonitor `sm` against the case's values: https with the TLS Secret's files when the
// metrics port serves TLS, else http without tlsConfig. `services`: the client Services it selects.
function checkServiceMonitor(report, sm, { values, services }) {
  const tls = (values.security || {}).tls || {};
  const scheme = metricsScheme(values);
  const https = scheme === 'https';
  const ref = (r) => (r ? `${r.name}/${r.key}` : 'none');
  for (const [i, e] of sm.spec.endpoints.entries()) {
    const where = `ServiceMonitor/${sm.metadata.name} endpoint ${i}`;
    report.check(e.scheme === scheme, `${where}: scheme ${e.scheme}, expected ${scheme}`);
    const t = e.tlsConfig;
    if (!https) {
      report.check(!t, `${where}: tlsConfig on an http scrape`);
      continue;
    }
    if (!report.check(t, `${where}: https without a tlsConfig`)) continue;
    const ca = t.ca && t.ca.secret;
    report.check(ca && ca.name === tls.secretName && ca.key === 'ca.crt',
      `${where}: tlsConfig.ca ${ref(ca)}, expected ${tls.secretName}/ca.crt`);
    report.check(!t.insecureSkipVerify && !t.caFile, `${where}: must verify against the Secret's ca.crt`);
    const names = services.map((s) => `${s.metadata.name}.${NAMESPACE}.svc`);
    report.check(names.includes(t.serverName),
      `${where}: serverName ${t.serverName}, expected a client Service name the certificate carries (${names.join(', ')})`);
    const cert = t.cert && t.cert.secret;
    if (tls.clientAuth === 'require') {
      report.check(cert && cert.name === tls.secretName && cert.key === 'tls.crt',
        `${where}: tlsConfig.cert ${ref(cert)}, expected ${tls.secretName}/tls.crt (clientAuth require)`);
      report.check(t.keySecret && t.keySecret.name === tls.secretName && t.keySecret.key === 'tls.key',
        `${where}: tlsConfig.keySecret ${ref(t.keySecret)}, expected ${tls.secretName}/tls.key (clientAuth require)`);
    } else {
      report.check(!t.cert && !t.keySecret && !t.certFile && !t.keyFile,
        `${where}: a client certificate, but the metrics port asks for none (clientAuth ${tls.clientAuth || 'none'})`);
    }
  }
}

module.exports = {
  checkSecurity, checkServiceMonitor, metricsScheme, aclLineProblems,
};
