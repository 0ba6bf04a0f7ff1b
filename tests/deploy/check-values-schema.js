// The chart's values schema against values.yaml and the templates (scripts/check-deploy.sh):
//   * every key under values.yaml's `defaults` is declared in values.schema.json (walking every
//     map whose keys the schema fixes), every key the schema declares for `defaults` is in
//     values.yaml (documented there), and every fixed-key object of the defaults schema refuses
//     other keys (additionalProperties: false);
//   * each service section (broker, coordinator, queue, standalone) declares the keys of
//     `defaults` it may override: all of them but the booleans set in defaults only
//     (persistence.enabled, podDisruptionBudget.enabled), and podDisruptionBudget for the broker
//     alone (the one service that can run several pods);
//   * every service value the templates read ($v.<key>) is declared, or computed by
//     conduit.serviceValues.
// What the schema refuses is checked by rendering (check-deploy.sh, `reject`).
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const { ROOT, Report } = require('./repo_facts');

const CHART = path.join(ROOT, 'helm/conduit');
const report = new Report('values schema');
const schema = JSON.parse(fs.readFileSync(path.join(CHART, 'values.schema.json'), 'utf8'));
const values = YAML.parse(fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8'));

// A schema node with its local $ref resolved.
function resolve(node) {
  let n = node;
  while (n && n.$ref) {
    const m = n.$ref.match(/^#\/definitions\/(.+)$/);
    if (!report.check(m && schema.definitions && schema.definitions[m[1]], `unresolvable $ref ${n.$ref}`)) return {};
    n = schema.definitions[m[1]];
  }
  return n || {};
}

const isMap = (v) => v && typeof v === 'object' && !Array.isArray(v);

// values.yaml's keys below `where` are all declared; fixed-key objects refuse others.
let keys = 0;
function walk(value, node, where) {
  const s = resolve(node);
  if (!s.properties) return;
  report.check(s.additionalProperties === false,
    `${where}: the schema lists its keys but accepts others (additionalProperties is not false)`);
  for (const [key, sub] of Object.entries(s.properties)) {
    if (isMap(value) && key in value) continue;
    // Keys values.yaml leaves out are optional ones; still check their own objects are closed.
    walk(undefined, sub, `${where}.${key}`);
  }
  if (!isMap(value)) return;
  for (const [key, v] of Object.entries(value)) {
    keys++;
    if (!report.check(key in s.properties, `${where}.${key} is in values.yaml but not in values.schema.json`)) continue;
    walk(v, s.properties[key], `${where}.${key}`);
  }
}

const defaultsSchema = resolve(schema.properties.defaults);
walk(values.defaults, schema.properties.defaults, 'defaults');
for (const key of Object.keys(defaultsSchema.properties || {})) {
  report.check(isMap(values.defaults) && key in values.defaults,
    `defaults.${key} is declared in values.schema.json but values.yaml does not set (document) it`);
}
for (const key of defaultsSchema.required || []) {
  report.check(key in defaultsSchema.properties, `defaults: required key ${key} is not declared`);
}

// Service sections: the overridable keys of defaults.
const DEFAULTS_ONLY = { persistence: ['enabled'], podDisruptionBudget: ['enabled'] };
const SERVICES = ['broker', 'coordinator', 'queue', 'standalone'];
for (const svc of SERVICES) {
  const s = resolve(schema.properties[svc]);
  if (!report.check(s.properties && s.additionalProperties === false, `${svc}: no closed object schema`)) continue;
  for (const [key, sub] of Object.entries(defaultsSchema.properties)) {
    const has = key in s.properties;
    if (key === 'podDisruptionBudget') {
      report.check(has === (svc === 'broker'), svc === 'broker'
        ? 'broker: podDisruptionBudget is not declared (the cluster-mode brokers\' budget)'
        : `${svc}: declares podDisruptionBudget, but it runs one pod and never gets one`);
    } else {
      report.check(has, `${svc}.${key} is not declared, though defaults.${key} is`);
    }
    if (!has) continue;
    const mine = resolve(s.properties[key]);
    const theirs = resolve(sub);
    if (theirs.properties) {
      const want = Object.keys(theirs.properties).filter((k) => !(DEFAULTS_ONLY[key] || []).includes(k));
      const got = Object.keys(mine.properties || {});
      report.check(JSON.stringify(got.sort()) === JSON.stringify(want.sort()),
        `${svc}.${key} declares [${got}], expected [${want}] (defaults.${key} less what is set in defaults only)`);
    } else {
      report.check(JSON.stringify(mine) === JSON.stringify(theirs), `${svc}.${key} differs from defaults.${key}`);
    }
  }
}

// What the templates read of a service's values.
const COMPUTED = new Set(['binary', 'job', 'name', 'objectName', 'replicas', 'cluster', 'securityFlags', 'healthService']);
let reads = 0;
for (const f of fs.readdirSync(path.join(CHART, 'templates'))) {
  // Per define block: where $v is .Values itself (conduit.cluster), its reads are not a service's.
  const blocks = fs.readFileSync(path.join(CHART, 'templates', f), 'utf8').split(/\{\{-? define /);
  for (const block of blocks) for (const m of block.matchAll(/\$(v|merged|broker|log|first)\.([A-Za-z]+)/g)) {
    if (m[1] === 'v' && /\$v := \.Values\b/.test(block)) continue;
    reads++;
    const key = m[2];
    report.check(COMPUTED.has(key) || key in defaultsSchema.properties ||
      SERVICES.some((svc) => key in resolve(schema.properties[svc]).properties),
    `templates/${f} reads ${m[0]}, which neither values.schema.json declares nor conduit.serviceValues computes`);
  }
}

report.finish(`${keys} keys under values.yaml's defaults declared, every fixed-key object closed; ` +
  `${SERVICES.length} service sections override defaults' keys; ${reads} template reads of service values declared`);
