// Checks deploy/docker-compose.yml and its Prometheus config against the repository
// (scripts/check-deploy.sh runs docker-compose's own schema check first):
//   * Conduit services use the image `make image` builds (conduit:<appVersion>), run a binary
//     CMake defines — or, behind a profile of the service's name, one that is pending — with
//     flags the servers define (a built binary still behind its profile gets a note);
//   * their --listen/--metrics-listen ports are the container ports they publish; host ports are
//     unique and bound to 127.0.0.1;
//   * cluster-mode brokers (--etcd-endpoints) have distinct --broker-id values, advertise
//     <service>:<gRPC port> and name etcd endpoints that are services publishing that port;
//   * etcd is conduit-etcd:<appVersion>, built from docker/etcd.Dockerfile;
//   * other images are pinned to a version; bind mounts exist; named volumes and depends_on
//     targets are declared;
//   * Prometheus loads the config its --config.file names through its bind mount
//     (prometheus/prometheus.yml; the secure variant's prometheus/prometheus.secure.yml) and
//     scrapes every Conduit service on its metrics port as job conduit-<service>, where
//     numbered services (broker-1, broker-2 of the cluster profile) share their base's job
//     (conduit-broker); always-running services as static targets, services behind a profile
//     through DNS; a job scrapes nothing else; with scheme https exactly when the services serve
//     metrics over TLS (--metrics-tls-cert), else http (none does in the plain file).
//
// Usage: node check-compose.js                  deploy/docker-compose.yml as written
//        node check-compose.js --secure FILE     FILE: `docker-compose -f deploy/docker-compose.yml
//          -f deploy/docker-compose.secure.yml --profile cluster config`, the merged secure variant:
//          the checks above (make certs' certs/dev may be missing) plus check-compose-security.js
//          (TLS on every server's gRPC and metrics ports; Prometheus scraping https trusting ca.pem).
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const {
  ROOT, conduitBinaries, serverFlags, appVersion, PENDING_BINARIES, Report,
} = require('./repo_facts');

const { checkSecureCompose, CERTS_DIR } = require('./check-compose-security');

const secureIndex = process.argv.indexOf('--secure');
const secureFile = secureIndex > 0 ? process.argv[secureIndex + 1] : null;
const report = new Report(secureFile ? 'compose --secure' : 'compose');
const DEPLOY = path.join(ROOT, 'deploy');
const compose = YAML.parse(fs.readFileSync(secureFile || path.join(DEPLOY, 'docker-compose.yml'), 'utf8'),
  { merge: true });
const binaries = conduitBinaries();
const flags = serverFlags();
const conduitImage = `conduit:${appVersion()}`;

const services = compose.services || {};
const hostPorts = new Map();
const conduitServices = new Map(); // name → metrics port
const metricsTls = new Set(); // Conduit services serving metrics over HTTPS
const notes = [];

function flagValue(command, flag) {
  const arg = command.find((a) => a.startsWith(`--${flag}=`));
  return arg ? arg.slice(flag.length + 3) : null;
}

function portOfListen(command, flag) {
  const m = (flagValue(command, flag) || '').match(/:(\d+)$/);
  return m ? Number(m[1]) : null;
}
const brokerIds = new Map(); // cluster-mode broker id → service

for (const [name, svc] of Object.entries(services)) {
  const where = `service ${name}`;
  const image = svc.image || '';
  const publishes = new Set();
  for (const p of svc.ports || []) {
    const m = String(p).match(/^(?:(127\.0\.0\.1):)?(\d+):(\d+)(?:\/tcp)?$/);
    if (!report.check(m, `${where}: port "${p}" is not HOST_IP:HOST_PORT:CONTAINER_PORT`)) continue;
    report.check(m[1] === '127.0.0.1', `${where}: port ${p} binds beyond 127.0.0.1`);
    const host = Number(m[2]);
    report.check(!hostPorts.has(host), `${where}: host port ${host} also used by ${hostPorts.get(host)}`);
    hostPorts.set(host, name);
    publishes.add(Number(m[3]));
  }
  for (const v of svc.volumes || []) {
    const source = String(v).split(':')[0];
    if (source.startsWith('.') || source.startsWith('/')) {
      // make certs writes certs/dev; a checkout need not have run it.
      const made = secureFile && path.resolve(DEPLOY, source) === path.join(ROOT, CERTS_DIR);
      report.check(made || fs.existsSync(path.resolve(DEPLOY, source)), `${where}: bind mount ${source} does not exist`);
    } else {
      report.check(compose.volumes && source in compose.volumes, `${where}: volume ${source} is not declared`);
    }
  }
  for (const dep of [].concat(Array.isArray(svc.depends_on) ? svc.depends_on : Object.keys(svc.depends_on || {}))) {
    report.check(dep in services, `${where}: depends_on ${dep}, which is not a service`);
  }

  if (secureFile && image.startsWith('conduit:') && (svc.command || [])[0] === '/bin/sh') {
    // The secure variant's certificate setup job: check-compose-security.js.
  } else if (image.startsWith('conduit:') || image === 'conduit') {
    report.check(image === conduitImage, `${where}: image ${image}, but make image builds ${conduitImage}`);
    const command = svc.command || [];
    report.check(Array.isArray(command) && command.length > 0, `${where}: command must be a list naming the binary`);
    const binary = command[0];
    const profiles = svc.profiles || [];
    if (binaries.has(binary)) {
      if (profiles.includes(name)) {
        // Built is not the same as ready to run by default: say so, don't fail.
        notes.push(`${where}: ${binary} is built now but still behind the profile [${profiles}]; ` +
          'drop the profile (and make its Prometheus job static) when it should run by default');
      }
    } else if (PENDING_BINARIES.get(binary) === name) {
      report.check(profiles.length === 1 && profiles[0] === name,
        `${where}: ${binary} is not built yet; the service needs the profile [${name}]`);
    } else {
      report.fail(`${where}: runs ${binary}, which no CMakeLists.txt defines`);
    }
    for (const arg of command.slice(1)) {
      const m = arg.match(/^--([a-z0-9_-]+)(=|$)/);
      if (report.check(m, `${where}: argument ${arg} is not --flag[=value]`)) {
        report.check(flags.has(m[1].replaceAll('-', '_')), `${where}: flag --${m[1]} is not defined by the servers`);
      }
    }
    const grpc = portOfListen(command, 'listen');
    const metrics = portOfListen(command, 'metrics-listen');
    report.check(grpc && publishes.has(grpc), `${where}: --listen port ${grpc} is not published`);
    report.check(metrics && publishes.has(metrics), `${where}: --metrics-listen port ${metrics} is not published`);
    report.check(svc.build || Object.values(services).some((s) => s.image === image && s.build),
      `${where}: no service builds ${image}`);
    conduitServices.set(name, metrics);
    if (flagValue(command, 'metrics-tls-cert')) metricsTls.add(name);
    const etcd = flagValue(command, 'etcd-endpoints');
    if (binary === 'conduit-broker' && etcd) {
      const id = flagValue(command, 'broker-id');
      report.check(/^\d+$/.test(id || '') && !brokerIds.has(id),
        `${where}: --broker-id=${id} must be a number no other broker has (${brokerIds.get(id) || 'none'})`);
      brokerIds.set(id, name);
      report.check(flagValue(command, 'advertise-address') === `${name}:${grpc}`,
        `${where}: --advertise-address must be ${name}:${grpc}, its name on the compose network`);
      for (const e of etcd.split(',')) {
        const [host, port] = e.split(':');
        const etcdCommand = (services[host] && services[host].command) || [];
        report.check(etcdCommand.some((a) => a.startsWith('--listen-client-urls=') && a.endsWith(`:${port}`)),
          `${where}: --etcd-endpoints names ${e}, which is no etcd service's client port`);
      }
    }
  } else if (image.startsWith('conduit-etcd')) {
    // docker/etcd.Dockerfile, tagged like the Conduit image by scripts/build-image.sh.
    report.check(image === `conduit-etcd:${appVersion()}`, `${where}: image ${image}, but make image builds conduit-etcd:${appVersion()}`);
    report.check(svc.build && svc.build.dockerfile === 'etcd.Dockerfile' &&
      fs.existsSync(path.resolve(DEPLOY, svc.build.context, svc.build.dockerfile)),
    `${where}: must build ${image} from docker/etcd.Dockerfile`);
  } else {
    report.check(/^[a-z0-9./_-]+:v?\d+(\.\d+)*$/.test(image), `${where}: image "${image}" is not pinned to a version`);
  }
}

// The Prometheus config: the file the Prometheus service's --config.file names, through its bind
// mount (sources: relative in the file as written, absolute in `docker-compose config` output).
const promEntry = Object.entries(services).find(([, s]) => (s.image || '').startsWith('prom/prometheus:'));
let prometheus = {};
let prometheusFile = null;
if (report.check(promEntry, 'no Prometheus service (image prom/prometheus)')) {
  const [promName, promSvc] = promEntry;
  const configFile = flagValue(promSvc.command || [], 'config.file');
  const mount = (promSvc.volumes || []).map((v) => String(v).split(':'))
    .find(([source, target]) => (source.startsWith('.') || source.startsWith('/')) &&
      configFile && configFile.startsWith(`${target}/`));
  prometheusFile = mount && path.resolve(DEPLOY, mount[0], configFile.slice(mount[1].length + 1));
  if (report.check(prometheusFile && fs.existsSync(prometheusFile),
    `service ${promName}: --config.file=${configFile} is no file of a bind mount`)) {
    prometheus = YAML.parse(fs.readFileSync(prometheusFile, 'utf8'));
  }
}

const promConfigName = path.basename(prometheusFile || 'prometheus.yml');

// Prometheus jobs ↔ Conduit services.
const jobOf = (name) => `conduit-${name.replace(/-\d+$/, '')}`;
const jobs = new Map((prometheus.scrape_configs || []).map((j) => [j.job_name, j]));
const staticTargets = (job) => (job.static_configs || []).flatMap((c) => c.targets);
const dnsTargets = (job) => (job.dns_sd_configs || []).flatMap((d) => d.names.map((n) => `${n}:${d.port}`));
for (const [name, metricsPort] of conduitServices) {
  const job = jobs.get(jobOf(name));
  if (!report.check(job, `${promConfigName} has no job ${jobOf(name)} for service ${name}`)) continue;
  const optional = (services[name].profiles || []).length > 0;
  const target = `${name}:${metricsPort}`;
  const [want, not] = optional ? [dnsTargets(job), staticTargets(job)] : [staticTargets(job), dnsTargets(job)];
  report.check(want.includes(target) && !not.includes(target),
    `job ${jobOf(name)} must scrape ${target} ${optional
      ? 'through dns_sd_configs only (a service behind a profile runs only sometimes)'
      : 'as a static target only (an always-running service must show as down when it stops)'}`);
  const scheme = metricsTls.has(name) ? 'https' : 'http';
  report.check((job.scheme || 'http') === scheme,
    `job ${jobOf(name)} scrapes ${job.scheme || 'http'}, but service ${name} serves its metrics over ${scheme}`);
}
for (const [jobName, job] of jobs) {
  if (!jobName.startsWith('conduit-')) continue;
  const targets = [...staticTargets(job), ...dnsTargets(job)];
  report.check(targets.length > 0, `${promConfigName} job ${jobName} scrapes nothing`);
  for (const t of targets) {
    const name = t.split(':')[0];
    report.check(conduitServices.get(name) === Number(t.split(':')[1]) && jobOf(name) === jobName,
      `${promConfigName} job ${jobName} scrapes ${t}, which is no metrics port of a service of that job`);
  }
}

let secured = '';
if (secureFile) {
  const isConduitServer = (svc) => (svc.image || '').startsWith('conduit:') && binaries.has((svc.command || [])[0]);
  const n = checkSecureCompose(report, services, {
    root: ROOT, isConduitServer, prometheus: promEntry && { name: promEntry[0], svc: promEntry[1], config: prometheus },
  });
  secured = `; ${n} Conduit servers on TLS with tokens and ACLs, metrics scraped over https`;
}

for (const n of notes) console.log(`note compose: ${n}`);
report.finish(`${Object.keys(services).length} services (${conduitServices.size} Conduit: ` +
  `${[...conduitServices.keys()].join(', ')}), ${hostPorts.size} host ports, ${jobs.size} scrape jobs ` +
  `(${path.relative(ROOT, prometheusFile || '?')})${secured}`);
