// Checks deploy/docker-compose.yml and deploy/prometheus/prometheus.yml against the repository
// (scripts/check-deploy.sh runs docker-compose's own schema check first):
//   * Conduit services use the image `make image` builds (conduit:<appVersion>), run a binary
//     CMake defines — or, behind a profile of the service's name, one that is pending — with
//     flags the servers define (a built binary still behind its profile gets a note);
//   * their --listen/--metrics-listen ports are the container ports they publish; host ports are
//     unique and bound to 127.0.0.1;
//   * other images are pinned to a version; bind mounts exist; named volumes and depends_on
//     targets are declared;
//   * Prometheus scrapes every Conduit service as job conduit-<service> on its metrics port.
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const {
  ROOT, conduitBinaries, serverFlags, appVersion, PENDING_BINARIES, Report,
} = require('./repo_facts');

const report = new Report('compose');
const DEPLOY = path.join(ROOT, 'deploy');
const compose = YAML.parse(fs.readFileSync(path.join(DEPLOY, 'docker-compose.yml'), 'utf8'), { merge: true });
const prometheus = YAML.parse(fs.readFileSync(path.join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8'));
const binaries = conduitBinaries();
const flags = serverFlags();
const conduitImage = `conduit:${appVersion()}`;

const services = compose.services || {};
const hostPorts = new Map();
const conduitServices = new Map(); // name → metrics port
const notes = [];

function portOfListen(command, flag) {
  const arg = command.find((a) => a.startsWith(`--${flag}=`));
  if (!arg) return null;
  const m = arg.match(/:(\d+)$/);
  return m ? Number(m[1]) : null;
}

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
      report.check(fs.existsSync(path.resolve(DEPLOY, source)), `${where}: bind mount ${source} does not exist`);
    } else {
      report.check(compose.volumes && source in compose.volumes, `${where}: volume ${source} is not declared`);
    }
  }
  for (const dep of [].concat(Array.isArray(svc.depends_on) ? svc.depends_on : Object.keys(svc.depends_on || {}))) {
    report.check(dep in services, `${where}: depends_on ${dep}, which is not a service`);
  }

  if (image.startsWith('conduit:') || image === 'conduit') {
    report.check(image === conduitImage, `${where}: image ${image}, but make image builds ${conduitImage}`);
    const command = svc.command || [];
    report.check(Array.isArray(command) && command.length > 0, `${where}: command must be a list naming the binary`);
    const binary = command[0];
    const profiles = svc.profiles || [];
    if (binaries.has(binary)) {
      if (profiles.length) {
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
  } else {
    report.check(/^[a-z0-9./_-]+:v?\d+(\.\d+)*$/.test(image), `${where}: image "${image}" is not pinned to a version`);
  }
}

// Prometheus jobs ↔ Conduit services.
const jobs = new Map((prometheus.scrape_configs || []).map((j) => [j.job_name, j]));
for (const [name, metricsPort] of conduitServices) {
  const job = jobs.get(`conduit-${name}`);
  if (!report.check(job, `prometheus.yml has no job conduit-${name}`)) continue;
  const targets = [];
  for (const s of job.static_configs || []) targets.push(...s.targets);
  for (const d of job.dns_sd_configs || []) for (const n of d.names) targets.push(`${n}:${d.port}`);
  report.check(targets.length === 1 && targets[0] === `${name}:${metricsPort}`,
    `job conduit-${name} scrapes ${targets.join(', ')}, expected ${name}:${metricsPort}`);
  const optional = (services[name].profiles || []).length > 0;
  report.check(optional ? !job.static_configs : !job.dns_sd_configs,
    `job conduit-${name}: ${optional ? 'a service behind a profile needs dns_sd_configs'
      : 'an always-running service needs a static target (so it shows as down)'}`);
}
for (const jobName of jobs.keys()) {
  if (jobName.startsWith('conduit-')) {
    report.check(conduitServices.has(jobName.slice('conduit-'.length)), `prometheus.yml job ${jobName} has no compose service`);
  }
}

for (const n of notes) console.log(`note compose: ${n}`);
report.finish(`${Object.keys(services).length} services (${conduitServices.size} Conduit: ` +
  `${[...conduitServices.keys()].join(', ')}), ${hostPorts.size} host ports, ${jobs.size} scrape jobs`);
