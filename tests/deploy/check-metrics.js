// The metric contract of the alert rules and the dashboard (scripts/check-deploy.sh):
//   * every conduit_* name they use, and every standard process_* one, is registered by the C++
//     sources or listed in deploy/prometheus/pending-metrics.txt;
//   * rule groups in conduit.rules.yml use only registered, unlisted names; groups using a listed
//     name end in "-pending" and live in conduit-pending.rules.yml, and every "-pending" group
//     uses one;
//   * a listed name the sources register by now gets a note (its alerts work; tidy them up);
//   * alerts carry severity, summary, description and a runbook anchor that deploy/README.md has;
//   * the chart's copies of the rules and the dashboard equal deploy/'s.
// Also writes every dashboard query as a recording rule to argv[2] so promtool checks its syntax.
'use strict';

const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const { ROOT, exportedMetrics, pendingMetrics, Report } = require('./repo_facts');

const report = new Report('metrics contract');
const exported = exportedMetrics();
const pending = pendingMetrics();
const RULES = path.join(ROOT, 'deploy/prometheus/rules');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/dashboards/conduit.json');

// conduit_* and process_* names in a PromQL expression; histogram series map to their family.
function metricsIn(expr) {
  const names = new Set();
  for (const m of expr.matchAll(/\b(?:conduit|process)_[a-z0-9_]+/g)) {
    let name = m[0];
    const base = name.replace(/_(bucket|sum|count)$/, '');
    if (base !== name && (exported.has(base) || pending.has(base))) name = base;
    names.add(name);
  }
  return names;
}

function checkName(name, where) {
  if (pending.has(name)) return 'pending';
  if (exported.has(name)) return 'exported';
  report.fail(`${where} uses ${name}, which no C++ source registers and ` +
    'deploy/prometheus/pending-metrics.txt does not list');
  return 'unknown';
}

// A pending name the sources register by now: its alerts already work. Said, not failed — a
// service landing its metrics should not break `make test` before the rules are tidied.
const notes = [];
for (const name of pending.keys()) {
  if (exported.has(name)) {
    notes.push(`${name} is registered in the C++ sources now: its pending alerts are live; delete ` +
      'its line from deploy/prometheus/pending-metrics.txt and move its alerts to conduit.rules.yml');
  }
}

let ruleCount = 0;
let pendingRuleCount = 0;
const ruleFiles = fs.readdirSync(RULES).filter((f) => f.endsWith('.yml')).sort();
report.check(ruleFiles.join(' ') === 'conduit-pending.rules.yml conduit.rules.yml',
  `deploy/prometheus/rules holds ${ruleFiles.join(', ')}; the chart includes exactly ` +
  'conduit.rules.yml and conduit-pending.rules.yml');
for (const file of ruleFiles) {
  const doc = YAML.parse(fs.readFileSync(path.join(RULES, file), 'utf8'));
  const isPendingFile = file === 'conduit-pending.rules.yml';
  for (const group of doc.groups) {
    const isPendingGroup = group.name.endsWith('-pending');
    report.check(isPendingGroup === isPendingFile,
      `${file}: group ${group.name} ${isPendingFile ? 'must' : 'must not'} end in "-pending"`);
    let usesPending = false;
    for (const rule of group.rules) {
      ruleCount++;
      if (isPendingGroup) pendingRuleCount++;
      const where = `${file} ${group.name}/${rule.alert || rule.record}`;
      for (const name of metricsIn(rule.expr)) {
        const kind = checkName(name, where);
        if (kind === 'pending') {
          usesPending = true;
          report.check(isPendingGroup, `${where} uses the pending metric ${name} outside a -pending group`);
        }
      }
      if (rule.alert) {
        for (const key of ['summary', 'description', 'runbook']) {
          report.check(rule.annotations && rule.annotations[key], `${where} has no ${key} annotation`);
        }
        report.check(rule.labels && ['critical', 'warning', 'info'].includes(rule.labels.severity),
          `${where} has no severity label (critical, warning or info)`);
        const anchor = (rule.annotations.runbook || '').split('#')[1];
        if (anchor) {
          const readme = fs.readFileSync(path.join(ROOT, 'deploy/README.md'), 'utf8');
          report.check(new RegExp(`^#+ .*\\b${anchor}\\b`, 'im').test(readme),
            `${where}: runbook anchor #${anchor} has no heading in deploy/README.md`);
        }
      }
    }
    if (isPendingGroup) {
      report.check(usesPending, `${group.name} uses no name of pending-metrics.txt: move it to conduit.rules.yml`);
    }
  }
}

// Dashboard: every query's metrics, and a rules file of its queries for promtool.
const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
const queries = [];
(function collect(panels) {
  for (const p of panels || []) {
    for (const t of p.targets || []) queries.push({ panel: p.title, expr: t.expr });
    collect(p.panels);
  }
})(dashboard.panels);
for (const q of queries) {
  for (const name of metricsIn(q.expr)) checkName(name, `dashboard panel "${q.panel}"`);
}
const promqlRules = {
  groups: [{
    name: 'dashboard-queries',
    rules: queries.map((q, i) => ({
      record: `dashboard:query_${i}`,
      // Grafana's variables, replaced as Grafana would before sending the query.
      expr: q.expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', 'conduit-.*'),
    })),
  }],
};
if (process.argv[2]) fs.writeFileSync(process.argv[2], YAML.stringify(promqlRules));

// The chart's copies.
for (const [copy, original] of [
  ['helm/conduit/files/rules/conduit.rules.yml', 'deploy/prometheus/rules/conduit.rules.yml'],
  ['helm/conduit/files/rules/conduit-pending.rules.yml', 'deploy/prometheus/rules/conduit-pending.rules.yml'],
  ['helm/conduit/files/dashboards/conduit.json', 'deploy/grafana/dashboards/conduit.json'],
]) {
  const a = fs.existsSync(path.join(ROOT, copy)) ? fs.readFileSync(path.join(ROOT, copy), 'utf8') : null;
  report.check(a === fs.readFileSync(path.join(ROOT, original), 'utf8'),
    `${copy} differs from ${original}: cp ${original} ${copy}`);
}

for (const n of notes) console.log(`note metrics: ${n}`);
report.finish(`${ruleCount} rules (${ruleCount - pendingRuleCount} active, ${pendingRuleCount} pending), ` +
  `${queries.length} dashboard queries; ${exported.size} metrics registered in C++, ` +
  `${pending.size} pending (deploy/prometheus/pending-metrics.txt)`);
