// Checks of deploy/docker-compose.secure.yml as docker-compose merges it over the base file;
// check-compose.js --secure calls checkSecureCompose with the merged services
// (`docker-compose -f deploy/docker-compose.yml -f deploy/docker-compose.secure.yml --profile
// cluster config`):
//   * one setup job (the conduit image running /bin/sh) copies make certs' ca.pem, server.pem and
//     server.key from certs/dev (read-only) into a named volume, owned by the servers' uid 10001,
//     renamed into place; it runs as root with only CHOWN and DAC_OVERRIDE, without a network;
//   * every Conduit server (none left plaintext, the cluster profile's included) waits for that
//     job, serves TLS from files of that volume mounted read-only, verifies client certificates
//     against ca.pem unless --tls-client-auth=none, dials other servers trusting ca.pem, and gives
//     the CLI (CONDUIT_TLS_CA) the same CA;
//   * its token, ACL and peer token files lie in a read-only directory bind mount (a file replaced
//     by a rename is seen; a single-file mount would keep the old inode) of a folder in the
//     repository; the token file and the ACL file parse as the servers parse them; the peer
//     token is in the token file, and its principal is a superuser;
//   * every name a server dials another by (--broker-address, --advertise-address) is a DNS SAN
//     of the server certificate scripts/make-certs.sh writes;
//   * every server serves /metrics over HTTPS with that volume's server.pem and server.key
//     (--metrics-tls-cert/--metrics-tls-key; --metrics-tls-client-ca, if set, its ca.pem), and
//     Prometheus waits for the setup job, mounts the volume read-only and scrapes every conduit-*
//     job with scheme https, tls_config.ca_file that volume's ca.pem, no insecure_skip_verify, a
//     client certificate if a server asks for one, and by names server.pem holds (server_name, or
//     every target's host; DNS-discovered targets relabelled to their name, not their IP).
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { aclLineProblems } = require('./check-security-manifests');

const CERTS_DIR = 'certs/dev'; // make certs' default (Makefile CERTS_DIR)
const SERVER_UID = '10001';
const CERT_FILES = ['ca.pem', 'server.pem', 'server.key'];

function flagValue(command, flag) {
  const arg = command.find((a) => a.startsWith(`--${flag}=`));
  return arg ? arg.slice(flag.length + 3) : undefined;
}

// A service's volumes as {source, target, readOnly}, from `docker-compose config` short syntax.
function mounts(svc) {
  return (svc.volumes || []).map((v) => {
    const [source, target, mode] = String(v).split(':');
    return { source, target, readOnly: mode === 'ro' };
  });
}

function mountOf(svc, file) {
  return mounts(svc).find((m) => file && file.startsWith(`${m.target}/`));
}

// The DNS SANs of make-certs.sh's server certificate.
function serverCertNames(root) {
  const script = fs.readFileSync(path.join(root, 'scripts/make-certs.sh'), 'utf8');
  const m = script.match(/^leaf server [\s\S]*?subjectAltName = ([^"\n]+)/m);
  return m ? m[1].split(',').map((s) => s.trim()).filter((s) => s.startsWith('DNS:')).map((s) => s.slice(4)) : [];
}

// Token file lines: [{hash, principal}], problems reported.
function parseTokens(report, file) {
  const entries = [];
  fs.readFileSync(file, 'utf8').split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const f = line.split(/[ \t]+/);
    if (report.check(f.length === 2 && /^[0-9a-fA-F]{64}$/.test(f[0]) && /^[^\s:]+:\S+$/.test(f[1]),
      `${file}:${i + 1}: "${line}" is not "<sha256-hex> <Type>:<name>"`)) {
      entries.push({ hash: f[0].toLowerCase(), principal: f[1] });
    }
  });
  return entries;
}

// Prometheus (`prometheus`: {name, svc, config}) scraping the servers' metrics over HTTPS from
// the certificate volume `volume`; `clientCerts`: whether a server asks scrapers for a certificate.
function checkSecureScrape(report, prometheus, { volume, jobName, certNames, clientCerts }) {
  if (!report.check(prometheus, 'secure: no Prometheus service')) return;
  const { name, svc, config } = prometheus;
  const w = `secure: service ${name}`;
  const dep = (svc.depends_on || {})[jobName];
  report.check(dep && dep.condition === 'service_completed_successfully', `${w}: must wait for ${jobName} to complete`);
  const jobs = (config.scrape_configs || []).filter((j) => j.job_name.startsWith('conduit-'));
  report.check(jobs.length > 0, `${w}: its config has no conduit-* job`);
  for (const job of jobs) {
    const where = `${w}: job ${job.job_name}`;
    const t = job.tls_config || {};
    report.check(job.scheme === 'https', `${where}: scheme ${job.scheme || 'http'}, expected https`);
    const m = mountOf(svc, t.ca_file);
    report.check(m && m.source === volume && m.readOnly && path.basename(t.ca_file) === 'ca.pem',
      `${where}: tls_config.ca_file=${t.ca_file} must be ca.pem of the volume ${volume}, mounted read-only`);
    report.check(!t.insecure_skip_verify, `${where}: insecure_skip_verify`);
    if (clientCerts) {
      report.check(t.cert_file && t.key_file, `${where}: a server requires a client certificate (--metrics-tls-client-ca); tls_config has none`);
    }
    const hosts = t.server_name ? [t.server_name] : [
      ...(job.static_configs || []).flatMap((c) => c.targets.map((x) => x.split(':')[0])),
      ...(job.dns_sd_configs || []).flatMap((d) => d.names),
    ];
    for (const h of hosts) {
      report.check(certNames.includes(h), `${where}: ${h} is not a DNS SAN of make certs' server.pem (${certNames.join(', ')})`);
    }
    if ((job.dns_sd_configs || []).length && !t.server_name) {
      // A DNS-discovered target's address is the IP the name resolved to, which server.pem lacks.
      report.check((job.relabel_configs || []).some((r) => (r.source_labels || []).includes('__meta_dns_name') &&
        r.target_label === '__address__'),
      `${where}: DNS-discovered targets must be relabelled to their name (__meta_dns_name → __address__): their IP is no name of server.pem`);
    }
  }
}

function checkSecureCompose(report, services, { root, isConduitServer, prometheus }) {
  // The setup job.
  const jobs = Object.entries(services).filter(([, s]) => (s.image || '').startsWith('conduit:') &&
    (s.command || [])[0] === '/bin/sh');
  if (!report.check(jobs.length === 1, `secure: ${jobs.length} certificate setup jobs, expected 1`)) return;
  const [jobName, job] = jobs[0];
  const where = `secure: service ${jobName}`;
  report.check(job.user === '0:0' && job.network_mode === 'none' && String(job.restart) === 'no' &&
    !(job.ports || []).length, `${where}: must run once as root without a network or ports`);
  report.check((job.cap_drop || []).includes('ALL') &&
    JSON.stringify([...(job.cap_add || [])].sort()) === JSON.stringify(['CHOWN', 'DAC_OVERRIDE']),
  `${where}: capabilities must be dropped but CHOWN and DAC_OVERRIDE`);
  const source = mounts(job).find((m) => m.source === path.join(root, CERTS_DIR));
  const target = mounts(job).find((m) => !m.source.startsWith('/') && !m.readOnly);
  report.check(source && source.readOnly, `${where}: must mount ${CERTS_DIR} (make certs) read-only`);
  if (!report.check(target, `${where}: must write into a named volume`)) return;
  const script = (job.command || []).slice(2).join(' ');
  for (const f of CERT_FILES) {
    report.check(source && script.includes(`cp ${source.target}/${f} ${target.target}/${f}.new`) &&
      script.includes(`mv -f ${target.target}/${f}.new ${target.target}/${f}`),
    `${where}: must copy ${f} into ${target.source} and rename it into place`);
  }
  report.check(new RegExp(`chown ${SERVER_UID}:${SERVER_UID} `).test(script), `${where}: must hand the files to uid ${SERVER_UID}`);

  // The servers.
  const certNames = serverCertNames(root);
  report.check(certNames.length > 0, 'secure: no DNS SAN found for the server certificate in scripts/make-certs.sh');
  let servers = 0;
  let clientCerts = false;
  for (const [name, svc] of Object.entries(services)) {
    if (!isConduitServer(svc)) continue;
    servers += 1;
    const w = `secure: service ${name}`;
    const command = svc.command || [];
    const dep = (svc.depends_on || {})[jobName];
    report.check(dep && dep.condition === 'service_completed_successfully', `${w}: must wait for ${jobName} to complete`);
    const certFile = (flag, want) => {
      const file = flagValue(command, flag);
      const m = mountOf(svc, file);
      report.check(m && m.source === target.source && m.readOnly && path.basename(file) === want,
        `${w}: --${flag}=${file} must be ${want} of the volume ${target.source}, mounted read-only`);
    };
    certFile('tls-cert', 'server.pem');
    certFile('tls-key', 'server.key');
    certFile('peer-tls-ca', 'ca.pem');
    certFile('metrics-tls-cert', 'server.pem');
    certFile('metrics-tls-key', 'server.key');
    if (flagValue(command, 'metrics-tls-client-ca') !== undefined) {
      certFile('metrics-tls-client-ca', 'ca.pem');
      clientCerts = true;
    }
    const clientAuth = flagValue(command, 'tls-client-auth');
    report.check(['none', 'request', 'require'].includes(clientAuth), `${w}: --tls-client-auth=${clientAuth}`);
    if (clientAuth !== 'none') certFile('tls-client-ca', 'ca.pem');
    if (clientAuth === 'require') {
      report.check(flagValue(command, 'peer-tls-cert'), `${w}: with require the servers must present a certificate to each other`);
    }
    const env = svc.environment || {};
    const cliCa = Array.isArray(env) ? (env.find((e) => e.startsWith('CONDUIT_TLS_CA=')) || '').slice(15) : env.CONDUIT_TLS_CA;
    report.check(cliCa === flagValue(command, 'peer-tls-ca'), `${w}: CONDUIT_TLS_CA=${cliCa} must be the CA the servers trust`);

    const authFile = (flag) => {
      const file = flagValue(command, flag);
      const m = mountOf(svc, file);
      if (!report.check(m && m.readOnly && m.source.startsWith('/') && fs.existsSync(m.source) &&
        fs.statSync(m.source).isDirectory(), `${w}: --${flag}=${file} must lie in a read-only directory bind mount`)) return null;
      const host = path.join(m.source, file.slice(m.target.length + 1));
      return report.check(fs.existsSync(host), `${w}: --${flag}: ${host} does not exist`) ? host : null;
    };
    const tokens = authFile('auth-token-file');
    const acls = authFile('acl-file');
    const peer = authFile('peer-token-file');
    const entries = tokens ? parseTokens(report, tokens) : [];
    if (acls) {
      fs.readFileSync(acls, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
        .forEach((l) => {
          const problems = aclLineProblems(l);
          report.check(!problems.length, `${acls}: "${l}" is no ACL file line (${problems.join(', ')})`);
        });
    }
    if (peer) {
      const hash = crypto.createHash('sha256').update(fs.readFileSync(peer, 'utf8').trim()).digest('hex');
      const entry = entries.find((e) => e.hash === hash);
      const superusers = (flagValue(command, 'superusers') || '').split(',');
      report.check(entry && superusers.includes(entry.principal),
        `${w}: the peer token's principal (${entry ? entry.principal : 'not in the token file'}) must be a superuser`);
    }
    for (const flag of ['broker-address', 'advertise-address']) {
      const address = flagValue(command, flag);
      if (!address) continue;
      const host = address.split(':')[0];
      report.check(certNames.includes(host),
        `${w}: --${flag}=${address}: ${host} is not a DNS SAN of make certs' server.pem (${certNames.join(', ')})`);
    }
  }
  checkSecureScrape(report, prometheus, {
    volume: target.source, jobName, certNames, clientCerts,
  });
  return servers;
}

module.exports = { checkSecureCompose, CERTS_DIR };
