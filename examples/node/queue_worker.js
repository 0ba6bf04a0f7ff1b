#!/usr/bin/env node
// A work-queue worker with retries, backoff and a dead-letter lane (conduit.queue.v1.WorkQueue).
//
//     node examples/node/queue_worker.js 127.0.0.1:7070
//
// The story:
//   1. Create queue "emails": at most 3 delivery attempts per job, and a short retry backoff
//      (200 ms initial, x2 per failure, capped at 1 s, with full jitter).
//   2. Enqueue four emails. One is a poison job: its template cannot be rendered, ever. Another
//      goes to a mail server that greylists (refuses the first try with "421 try again later",
//      accepts the retry), which is a transient failure.
//   3. Run the worker: long-poll Lease, send each email, Ack what was sent, Nack failures as
//      TRANSIENT with the reason (a worker rarely knows whether a failure is permanent). A nacked
//      job comes back after its backoff, as a new attempt with a new lease token and the
//      evidence of its earlier attempts.
//   4. Check what happened: the greylisted email succeeded on its 2nd attempt; the poison job
//      failed 3 times and the 3rd Nack answered dead=true; every retry waited for its backoff.
//   5. List the dead letters and show the evidence an operator needs: the payload, why it died,
//      every attempt (worker, times, outcome, reason). Then the queue stats.
//
// Every expectation is checked; exits 0 when all hold, 1 otherwise. The example starts from a
// clean slate: it deletes its queue "emails" when it exists. Every call has a deadline.
//
// Packages: @grpc/grpc-js and @grpc/proto-loader, the versions pinned by
// tests/polyglot/package.json (scripts/polyglot-deps.sh installs them into
// tests/polyglot/node_modules; this file loads them from there by path). The protos are loaded
// at run time from proto/ and /usr/include (google/protobuf/*.proto, apt libprotobuf-dev).
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');

const REPO = process.env.CONDUIT_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const NODE_MODULES = path.join(REPO, 'tests', 'polyglot', 'node_modules');
let grpc;
let protoLoader;
try {
  grpc = require(path.join(NODE_MODULES, '@grpc', 'grpc-js'));
  protoLoader = require(path.join(NODE_MODULES, '@grpc', 'proto-loader'));
} catch (err) {
  console.error(`queue_worker: FAIL: ${err.message}\n` +
    'Install the packages with scripts/polyglot-deps.sh (npm install in tests/polyglot).');
  process.exit(1);
}

const QUEUE = 'emails';
const WORKER_ID = `email-worker/${process.pid}`;
const MAX_ATTEMPTS = 3;
const BACKOFF_INITIAL_MS = 200;
const BACKOFF_MULTIPLIER = 2.0;
const BACKOFF_MAX_MS = 1000;
const VISIBILITY_TIMEOUT_S = 5;   // a lease lasts 5 s: sending one email takes far less
const DEADLINE_MS = 10_000;       // per call
const EXAMPLE_TIMEOUT_MS = 15_000;

// The emails to send. `key` is the idempotency key: enqueueing the same key again within the
// queue's idempotency window returns the existing job instead of sending a second email.
const EMAILS = [
  { key: 'welcome/alice', to: 'alice@example.com', template: 'welcome', vars: { name: 'Alice' } },
  { key: 'receipt/bob/1001', to: 'bob@greylisting.example', template: 'receipt',
    vars: { name: 'Bob', order: 1001, total: '25.99' } },
  // The poison job: the invoice template needs vars.total, which this payload lacks.
  { key: 'invoice/mallory/7', to: 'mallory@example.com', template: 'invoice',
    vars: { name: 'Mallory' } },
  { key: 'welcome/carol', to: 'carol@example.com', template: 'welcome', vars: { name: 'Carol' } },
];
const POISON_KEY = 'invoice/mallory/7';
const GREYLISTED_KEY = 'receipt/bob/1001';

// ------------------------------------------------------------------------------------------
// The email "sender": template rendering and an SMTP server stand-in.

const TEMPLATES = {
  welcome: (v) => `Welcome, ${v.name}!`,
  receipt: (v) => `Hi ${v.name}, order ${v.order}: ${v.total} EUR paid.`,
  invoice: (v) => `Dear ${v.name}, you owe ${v.total.toFixed(2)} EUR.`, // throws without total
};

class TransientError extends Error {}

// Greylisting: a mail server refuses the first delivery from an unknown sender with a 4xx and
// accepts a retry that comes a little later. The worker cannot tell this from a real outage.
const greylistSeen = new Set();
function smtpSend(to, body) {
  if (to.endsWith('@greylisting.example') && !greylistSeen.has(to)) {
    greylistSeen.add(to);
    throw new TransientError('SMTP 421 4.7.0 greylisted, try again later');
  }
  return `250 OK: ${body.length} bytes to ${to}`;
}

function sendEmail(email) {
  const render = TEMPLATES[email.template];
  let body;
  try {
    body = render(email.vars);
  } catch (err) {
    throw new Error(`template ${email.template} failed: ${err.message}`);
  }
  return smtpSend(email.to, body);
}

// ------------------------------------------------------------------------------------------
// gRPC plumbing.

function say(line = '') {
  process.stdout.write(`${line}\n`);
}

function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + DEADLINE_MS },
      (err, response) => (err ? reject(err) : resolve(response)));
  });
}

const ms = (millis) => ({ seconds: Math.floor(millis / 1000), nanos: (millis % 1000) * 1e6 });
const toMillis = (ts) => (ts ? Number(ts.seconds) * 1000 + Math.round(ts.nanos / 1e6) : null);
const toMicros = (ts) => (ts ? Number(ts.seconds) * 1e6 + Math.floor(ts.nanos / 1e3) : null);
const clock = (ts) => (ts ? new Date(toMillis(ts)).toISOString().slice(11, 23) : '-');

function loadClient(address) {
  // keepCase: field names as in the .proto; longs as Numbers (job ids here are small).
  const definition = protoLoader.loadSync('conduit/queue/v1/queue.proto', {
    keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true,
    includeDirs: [path.join(REPO, 'proto'), '/usr/include'],
  });
  const pkg = grpc.loadPackageDefinition(definition).conduit.queue.v1;
  return new pkg.WorkQueue(address, grpc.credentials.createInsecure());
}

// ------------------------------------------------------------------------------------------
// The example.

async function main(address) {
  const client = loadClient(address);
  try {
    await story(client, address);
  } finally {
    client.close();
  }
}

async function story(client, address) {
  say(`Conduit at ${address}`);
  try {
    await call(client, 'DeleteQueue', { name: QUEUE });
    say(`  deleted queue "${QUEUE}" left by an earlier run`);
  } catch (err) {
    if (err.code !== grpc.status.NOT_FOUND) throw err;
  }

  // -- 1. The queue.
  say();
  say(`== 1. Queue "${QUEUE}": max ${MAX_ATTEMPTS} attempts, backoff ${BACKOFF_INITIAL_MS} ms ` +
    `x${BACKOFF_MULTIPLIER} up to ${BACKOFF_MAX_MS} ms (full jitter), leases of ` +
    `${VISIBILITY_TIMEOUT_S} s`);
  const created = await call(client, 'CreateQueue', {
    name: QUEUE,
    config: {
      visibility_timeout: { seconds: VISIBILITY_TIMEOUT_S },
      max_attempts: MAX_ATTEMPTS,
      backoff_initial: ms(BACKOFF_INITIAL_MS),
      backoff_multiplier: BACKOFF_MULTIPLIER,
      backoff_max: ms(BACKOFF_MAX_MS),
    },
  });
  assert.equal(created.queue.config.max_attempts, MAX_ATTEMPTS, 'max_attempts of the new queue');

  // -- 2. The jobs.
  say();
  say('== 2. Enqueue four emails (one poison job, one to a greylisting mail server)');
  const enqueued = await call(client, 'Enqueue', {
    queue: QUEUE,
    jobs: EMAILS.map((e) => ({
      payload: Buffer.from(JSON.stringify(e)),
      idempotency_key: e.key,
      headers: [{ key: 'content-type', value: Buffer.from('application/json') }],
    })),
  });
  assert.equal(enqueued.jobs.length, EMAILS.length, 'one EnqueuedJob per job');
  const idOf = {};
  EMAILS.forEach((e, i) => {
    idOf[e.key] = enqueued.jobs[i].job_id;
    assert.equal(enqueued.jobs[i].duplicate, false, `${e.key} is new`);
    say(`  job ${enqueued.jobs[i].job_id}: ${e.key} -> ${e.to}`);
  });
  // The same idempotency key again: no second job.
  const again = await call(client, 'Enqueue', {
    queue: QUEUE, jobs: [{ payload: Buffer.from(JSON.stringify(EMAILS[0])), idempotency_key: EMAILS[0].key }],
  });
  assert.equal(again.jobs[0].duplicate, true, 'a repeated idempotency key is a duplicate');
  assert.equal(again.jobs[0].job_id, idOf[EMAILS[0].key], 'the duplicate names the existing job');
  say(`  enqueueing ${EMAILS[0].key} again returns job ${again.jobs[0].job_id}, duplicate=true`);

  // -- 3 and 4. The worker.
  say();
  say(`== 3. Worker ${WORKER_ID}: Lease (long-poll), send, Ack or Nack (transient)`);
  const history = {};      // job id -> [{attempt, outcome, leasedAtUs, retryAtUs, dead}]
  const acked = new Set();
  let poisonDead = false;
  const goodIds = EMAILS.filter((e) => e.key !== POISON_KEY).map((e) => idOf[e.key]);
  const giveUpAt = Date.now() + EXAMPLE_TIMEOUT_MS;
  while (!(poisonDead && goodIds.every((id) => acked.has(id)))) {
    assert.ok(Date.now() < giveUpAt, `the worker is not done after ${EXAMPLE_TIMEOUT_MS} ms ` +
      `(acked ${[...acked]}, poison dead: ${poisonDead})`);
    const polledAt = Date.now();
    const leased = await call(client, 'Lease', {
      queue: QUEUE, worker_id: WORKER_ID, max_jobs: 10, max_wait: { seconds: 2 },
    });
    if (leased.jobs.length === 0) continue;
    const waited = Date.now() - polledAt;
    say(`  leased ${leased.jobs.length} job(s)${waited >= 20 ? ` after a ${waited} ms long-poll` : ''}`);
    for (const job of leased.jobs) {
      await work(client, job, history, acked, (dead) => { poisonDead = poisonDead || dead; });
    }
  }

  // -- 4. What the worker saw, checked.
  say();
  say('== 4. Check: retries, backoff and the attempt limit');
  const poisonId = idOf[POISON_KEY];
  const greyId = idOf[GREYLISTED_KEY];
  for (const id of goodIds.filter((i) => i !== greyId)) {
    assert.deepEqual(history[id].map((h) => [h.attempt, h.outcome]), [[1, 'acked']],
      `job ${id} should be sent on its first attempt`);
  }
  assert.deepEqual(history[greyId].map((h) => [h.attempt, h.outcome]),
    [[1, 'nacked'], [2, 'acked']], 'the greylisted email: nacked once, then sent');
  assert.deepEqual(history[poisonId].map((h) => [h.attempt, h.outcome, h.dead]),
    [[1, 'nacked', false], [2, 'nacked', false], [3, 'nacked', true]],
    `the poison job: ${MAX_ATTEMPTS} transient nacks, the last one answered dead=true`);
  // Backoff, on the server's clock: after the n-th failure, retry_at lies between the Nack
  // (the attempt's ended_at, as the next delivery reports it) and Nack + min(200 ms x 2^(n-1),
  // 1 s) (full jitter: anywhere in between), and the retry is not leased before retry_at.
  for (const id of [greyId, poisonId]) {
    const h = history[id];
    for (let i = 0; i + 1 < h.length; i++) {
      const capUs = Math.min(BACKOFF_INITIAL_MS * BACKOFF_MULTIPLIER ** i, BACKOFF_MAX_MS) * 1000;
      const endedUs = toMicros(h[i + 1].previous[i].ended_at);
      const backoffUs = h[i].retryAtUs - endedUs;
      say(`  job ${id}: failure ${i + 1} -> retry_at ${(backoffUs / 1000).toFixed(1)} ms after ` +
        `the Nack (cap ${capUs / 1000} ms), attempt ${i + 2} leased ` +
        `${((h[i + 1].leasedAtUs - h[i].retryAtUs) / 1000).toFixed(1)} ms after retry_at`);
      assert.ok(backoffUs >= 0 && backoffUs <= capUs,
        `job ${id} attempt ${i + 1}: retry_at is ${backoffUs} µs after the nack, outside ` +
        `[0, ${capUs}] µs`);
      assert.ok(h[i + 1].leasedAtUs >= h[i].retryAtUs,
        `job ${id} attempt ${i + 2} was leased at ${h[i + 1].leasedAtUs} µs, before the ` +
        `retry_at ${h[i].retryAtUs} µs of attempt ${i + 1}`);
    }
  }
  say('  => every good email sent (one on its retry); the poison job stopped after ' +
    `${MAX_ATTEMPTS} attempts`);

  // -- 5. The dead-letter lane.
  say();
  say('== 5. The dead-letter lane keeps the evidence');
  const listed = await call(client, 'ListDeadLetters', { queue: QUEUE });
  assert.equal(listed.dead_letters.length, 1, 'exactly one dead letter');
  const dl = listed.dead_letters[0];
  say(`  job ${dl.job_id} (${dl.idempotency_key}) died at ${clock(dl.died_at)}, ` +
    `enqueued at ${clock(dl.enqueued_at)}, redriven ${dl.redrives} times`);
  say(`  why: ${dl.reason}`);
  say(`  payload: ${dl.payload.toString()}`);
  for (const a of dl.attempts) {
    say(`  attempt ${a.attempt}: ${a.worker_id} leased ${clock(a.leased_at)} ended ` +
      `${clock(a.ended_at)} ${a.outcome} ${a.failure_class}: ${a.reason}`);
  }
  assert.equal(dl.job_id, poisonId, 'the dead letter is the poison job');
  assert.equal(dl.idempotency_key, POISON_KEY, 'its idempotency key');
  assert.deepEqual(JSON.parse(dl.payload.toString()), EMAILS.find((e) => e.key === POISON_KEY),
    'its payload, unchanged');
  assert.deepEqual(dl.headers.map((h) => [h.key, h.value.toString()]),
    [['content-type', 'application/json']], 'its headers');
  assert.match(dl.reason, /template invoice failed/, 'the death reason names the failure');
  assert.equal(dl.redrives, 0, 'never redriven');
  assert.deepEqual(dl.attempts.map((a) => a.attempt), [1, 2, 3], 'three attempts');
  for (const a of dl.attempts) {
    assert.equal(a.worker_id, WORKER_ID, `attempt ${a.attempt}: worker id`);
    assert.equal(a.outcome, 'OUTCOME_NACKED', `attempt ${a.attempt}: outcome`);
    assert.equal(a.failure_class, 'FAILURE_CLASS_TRANSIENT', `attempt ${a.attempt}: class`);
    assert.match(a.reason, /template invoice failed/, `attempt ${a.attempt}: reason`);
    assert.ok(toMicros(a.leased_at) <= toMicros(a.ended_at), `attempt ${a.attempt}: times`);
  }
  for (let i = 0; i + 1 < dl.attempts.length; i++) {
    assert.ok(toMicros(dl.attempts[i].ended_at) <= toMicros(dl.attempts[i + 1].leased_at),
      `attempt ${i + 2} starts after attempt ${i + 1} ended`);
  }

  // The lane can be searched by reason: that is how an operator finds "all the jobs that died of
  // this bug" once it is fixed, to redrive them (RedriveDeadLetters) or discard them.
  const byReason = await call(client, 'ListDeadLetters',
    { queue: QUEUE, filter: { reason_contains: 'template invoice' } });
  assert.deepEqual(byReason.dead_letters.map((d) => d.job_id), [poisonId], 'filter by reason');
  const none = await call(client, 'ListDeadLetters',
    { queue: QUEUE, filter: { reason_contains: 'greylisted' } });
  assert.equal(none.dead_letters.length, 0, 'the greylisted email is not dead');
  say('  ListDeadLetters reason_contains "template invoice" -> the poison job; ' +
    '"greylisted" -> nothing');

  const stats = await call(client, 'GetQueueStats', { queue: QUEUE });
  say(`  stats: ready ${stats.ready}, delayed ${stats.delayed}, leased ${stats.leased}, ` +
    `dead ${stats.dead}`);
  assert.deepEqual([stats.ready, stats.delayed, stats.leased, stats.dead].map(Number), [0, 0, 0, 1],
    'queue stats ready/delayed/leased/dead');
  say('  => the good emails are gone (acked jobs are deleted); the poison job waits in the lane');
}

// One delivery of one job: send it, then Ack, or Nack as transient with the reason.
async function work(client, job, history, acked, onNack) {
  const email = JSON.parse(job.payload.toString());
  // On the server's clock: the lease began a visibility timeout before its deadline.
  const entry = {
    attempt: job.attempt, previous: job.previous_attempts,
    leasedAtUs: toMicros(job.deadline) - VISIBILITY_TIMEOUT_S * 1e6,
  };
  (history[job.job_id] = history[job.job_id] || []).push(entry);
  const earlier = job.previous_attempts.map((a) => `#${a.attempt} ${a.outcome}`);
  say(`    job ${job.job_id} ${email.key} attempt ${job.attempt}` +
    (earlier.length ? ` (earlier attempts: ${earlier.join(', ')})` : ''));
  assert.equal(job.previous_attempts.length, job.attempt - 1,
    `job ${job.job_id}: previous_attempts of attempt ${job.attempt}`);
  let result;
  try {
    result = sendEmail(email);
  } catch (err) {
    const nackedAt = Date.now();
    const resp = await call(client, 'Nack', {
      queue: QUEUE, job_id: job.job_id, lease_token: job.lease_token,
      reason: err.message, failure_class: 'FAILURE_CLASS_TRANSIENT',
    });
    Object.assign(entry, { outcome: 'nacked', dead: resp.dead, retryAtUs: toMicros(resp.retry_at) });
    say(`      failed: ${err.message}`);
    say(resp.dead
      ? `      Nack -> dead=true: ${MAX_ATTEMPTS} attempts used, moved to the dead-letter lane`
      : `      Nack -> retry at ${clock(resp.retry_at)} ` +
        `(in ${toMillis(resp.retry_at) - nackedAt} ms)`);
    onNack(resp.dead);
    return;
  }
  await call(client, 'Ack', { queue: QUEUE, job_id: job.job_id, lease_token: job.lease_token });
  entry.outcome = 'acked';
  acked.add(job.job_id);
  say(`      sent (${result}); Ack`);
}

const address = process.argv[process.argv.length - 1];
if (process.argv.length < 3 || !address.includes(':')) {
  console.error('usage: node queue_worker.js HOST:PORT');
  process.exit(2);
}
main(address).then(() => {
  say();
  say('queue_worker: PASS');
}).catch((err) => {
  console.error(`queue_worker: FAIL: ${err.stack || err}`);
  process.exit(1);
});
