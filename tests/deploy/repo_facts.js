// What the deployment checks compare against, read from the sources (no build needed): the
// Conduit executables CMake defines, the absl flags the servers accept, the conduit_* (and
// process_*) metric names the C++ code registers, the pending metric names, and the chart's appVersion.
'use strict';

const fs = require('fs');
const path = require('path');

const ROOT = path.resolve(__dirname, '..', '..');

function walk(dir, accept, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(p, accept, out);
    else if (accept(entry.name)) out.push(p);
  }
  return out;
}

function sourceDirs() {
  return ['common', 'services', 'tools'].map((d) => path.join(ROOT, d)).filter((d) => fs.existsSync(d));
}

// Executables named conduit or conduit-* that some CMakeLists.txt adds (the image ships these).
function conduitBinaries() {
  const names = new Set();
  for (const dir of sourceDirs()) {
    for (const f of walk(dir, (n) => n === 'CMakeLists.txt')) {
      for (const m of fs.readFileSync(f, 'utf8').matchAll(/add_executable\(\s*(conduit(?:-[a-z0-9-]+)?)\b/g)) {
        names.add(m[1]);
      }
    }
  }
  return names;
}

// absl flags defined by the server code (ABSL_FLAG(type, name, ...)); benchmarks excluded.
function serverFlags() {
  const names = new Set(['flagfile']);
  for (const dir of sourceDirs()) {
    for (const f of walk(dir, (n) => /\.(cc|h)$/.test(n))) {
      for (const m of fs.readFileSync(f, 'utf8').matchAll(/ABSL_FLAG\(\s*[^,]+,\s*([a-z0-9_]+)\s*,/g)) {
        names.add(m[1]);
      }
    }
  }
  return names;
}

// Metric family names registered in C++ (string literals "conduit_..." and the standard
// "process_..." ones of common/metrics/process_metrics.cc), minus tests.
function exportedMetrics() {
  const names = new Set();
  for (const dir of sourceDirs()) {
    for (const f of walk(dir, (n) => /\.(cc|h)$/.test(n) && !/_test\.cc$/.test(n))) {
      for (const m of fs.readFileSync(f, 'utf8').matchAll(/"((?:conduit|process)_[a-z0-9_]+)"/g)) names.add(m[1]);
    }
  }
  return names;
}

// deploy/prometheus/pending-metrics.txt: name → owner.
function pendingMetrics() {
  const text = fs.readFileSync(path.join(ROOT, 'deploy/prometheus/pending-metrics.txt'), 'utf8');
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const [name, owner] = line.trim().split(/\s+/);
    out.set(name, owner);
  }
  return out;
}

function appVersion() {
  const chart = fs.readFileSync(path.join(ROOT, 'helm/conduit/Chart.yaml'), 'utf8');
  const m = chart.match(/^appVersion:\s*"?([^"\s]+)"?\s*$/m);
  if (!m) throw new Error('helm/conduit/Chart.yaml has no appVersion');
  return m[1];
}

// Binaries the chart and compose may name before they exist, and the service they belong to.
const PENDING_BINARIES = new Map([
  ['conduit-coordinator', 'coordinator'],
  ['conduit-queue', 'queue'],
]);

// Collects failures; exits 1 at the end if any.
class Report {
  constructor(name) {
    this.name = name;
    this.failures = [];
  }
  fail(msg) {
    this.failures.push(msg);
  }
  check(cond, msg) {
    if (!cond) this.fail(msg);
    return cond;
  }
  finish(summary) {
    if (this.failures.length) {
      for (const f of this.failures) console.error(`FAIL ${this.name}: ${f}`);
      process.exit(1);
    }
    console.log(`ok ${this.name}: ${summary}`);
  }
}

module.exports = {
  ROOT, conduitBinaries, serverFlags, exportedMetrics, pendingMetrics, appVersion,
  PENDING_BINARIES, Report,
};
