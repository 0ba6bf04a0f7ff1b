#!/usr/bin/env node
// Polyglot test: examples/node/secure_client.js against a conduit-standalone that
// requires a client certificate, checks bearer tokens and enforces ACLs.
//
// Usage: node node_secure.js HOST:PORT, run by run_with_secure_server.sh, whose environment gives
// the CA, the worker's certificate and key, alice's token and mallory's (valid, without grants).
//
// With the example's own functions (channelCredentials, connect, run) it checks that
//   (a) over mTLS with alice's token the example's flow works, twice (the second run keeps the
//       topic and the queue): the records come back intact, the leased job is the one enqueued
//       and the queue is empty afterwards;
//   (b) the same flow with mallory's token fails with PERMISSION_DENIED naming User:mallory, and
//       so do her Produce, Fetch, Enqueue and Lease on alice's topic and queue; with a garbage
//       token it fails with UNAUTHENTICATED; with the certificate and no token, PERMISSION_DENIED
//       naming the certificate's principal (the token, when sent, names the caller instead);
//   (c) over a plaintext channel to the TLS port it fails with UNAVAILABLE;
//   (d) over TLS with alice's token but without a client certificate it fails with UNAVAILABLE;
// and that none of the refused runs created its topic. Exits 0 on success, 1 with a "FAIL:"
// message on the first failed expectation.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');

const ex = require(path.join(__dirname, '..', '..', 'examples', 'node', 'secure_client.js'));
const { runMain } = require('./node_common');

const { grpc, call } = ex;
const WORKER_PRINCIPAL = 'User:spiffe://conduit.dev/worker';

function env(name) {
  const value = process.env[name];
  assert.ok(value, `$${name} is not set: run me with run_with_secure_server.sh`);
  return value;
}

// Awaits `promise`, which must reject with gRPC status `code`; returns the error.
async function expectCode(code, what, promise) {
  let response;
  try {
    response = await promise;
  } catch (err) {
    if (err.code === undefined) throw err;
    assert.equal(grpc.status[err.code], grpc.status[code],
      `${what}: expected ${grpc.status[code]}, got ${grpc.status[err.code]} (${err.details})`);
    console.log(`  ok: ${what} -> ${grpc.status[err.code]} (${err.details})`);
    return err;
  }
  return assert.fail(`${what}: expected ${grpc.status[code]}, but it succeeded: ` +
    JSON.stringify(response));
}

async function main(address) {
  const [ca, cert, key] = ['CONDUIT_TLS_CA', 'CONDUIT_TLS_CERT', 'CONDUIT_TLS_KEY'].map(env);
  const goodToken = env('CONDUIT_TOKEN');
  const noGrantsToken = env('CONDUIT_TOKEN_NO_GRANTS');
  const prefix = env('CONDUIT_SECURE_PREFIX');
  const runId = crypto.randomBytes(6).toString('hex');
  const topic = `${prefix}node-${runId}`;
  const queue = `${prefix}node-${runId}`;
  const connect = (token, withCert = true) => ex.connect(address, ex.channelCredentials(
    { ca, token, cert: withCert ? cert : '', key: withCert ? key : '' }));

  // --- (a) mTLS and alice's token: the example works, and works again on what it left.
  const alice = connect(goodToken);
  await new Promise((resolve, reject) => alice.log.waitForReady(Date.now() + 10_000, (err) => (
    err ? reject(new Error(`could not connect to ${address}: ${err.message}`)) : resolve())));
  for (const run of [1, 2]) {
    const outcome = await ex.run(alice, { topic, queue });
    const first = (run - 1) * ex.RECORDS.length;
    assert.deepEqual(outcome.records, ex.RECORDS.map((r, i) => ({ offset: first + i, ...r })),
      `run ${run}: records fetched back`);
    assert.equal(outcome.leasedJobId, outcome.enqueuedJobId,
      `run ${run}: the leased job is the one enqueued`);
    assert.equal(outcome.jobPayload, ex.JOB, `run ${run}: leased job payload`);
  }
  const stats = await call(alice.work, 'GetQueueStats', { queue });
  assert.deepEqual([stats.ready, stats.delayed, stats.leased, stats.dead], [0, 0, 0, 0],
    'queue stats (ready, delayed, leased, dead) after two acked jobs');
  console.log(`  ok: (a) mTLS + alice's token: the example ran twice on ${topic} and ${queue}`);

  // --- (b) a valid token without grants, a garbage token, and the certificate alone.
  const refused = new Map();  // topic a refused run tried to create -> what it was
  const tryRun = (clients, suffix, what) => {
    refused.set(topic + suffix, what);
    return ex.run(clients, { topic: topic + suffix, queue: queue + suffix });
  };
  const mallory = connect(noGrantsToken);
  let err = await expectCode(grpc.status.PERMISSION_DENIED, "mallory's token: the example's flow",
    tryRun(mallory, '-mallory', "mallory's run"));
  assert.match(err.details, /User:mallory/, 'the refusal names User:mallory');
  for (const [what, client, method, request] of [
    ["Produce to alice's topic", mallory.log, 'Produce',
      { topic, records: [{ value: Buffer.from('x') }] }],
    ["Fetch from alice's topic", mallory.log, 'Fetch', { topic, partition: 0, offset: 0 }],
    ["Enqueue to alice's queue", mallory.work, 'Enqueue',
      { queue, jobs: [{ payload: Buffer.from('x') }] }],
    ["Lease from alice's queue", mallory.work, 'Lease', { queue, worker_id: 'mallory' }],
  ]) {
    await expectCode(grpc.status.PERMISSION_DENIED, `mallory's token: ${what}`,
      call(client, method, request));
  }
  mallory.close();

  const garbage = connect(`not-a-token-${runId}`);
  await expectCode(grpc.status.UNAUTHENTICATED, "a garbage token: the example's flow",
    tryRun(garbage, '-garbage', "the garbage token's run"));
  garbage.close();

  const certOnly = connect('');
  err = await expectCode(grpc.status.PERMISSION_DENIED, "the worker's certificate without a token",
    tryRun(certOnly, '-cert-only', 'the certificate-only run'));
  assert.ok(err.details.includes(WORKER_PRINCIPAL),
    `the refusal does not name ${WORKER_PRINCIPAL}: ${err.details}`);
  certOnly.close();

  // --- (c) plaintext to the TLS port.
  const plaintext = ex.connect(address, grpc.credentials.createInsecure());
  await expectCode(grpc.status.UNAVAILABLE, 'a plaintext channel to the TLS port',
    tryRun(plaintext, '-plaintext', 'the plaintext run'));
  plaintext.close();

  // --- (d) TLS and a good token, but no client certificate where one is required.
  const noCert = connect(goodToken, false);
  await expectCode(grpc.status.UNAVAILABLE, "TLS + alice's token without a client certificate",
    tryRun(noCert, '-no-cert', 'the run without a client certificate'));
  noCert.close();

  // None of the refused runs got as far as creating its topic (alice may see them all).
  const listed = new Set((await call(alice.log, 'ListTopics', {})).topics.map((t) => t.name));
  assert.ok(listed.has(topic), `alice's ListTopics does not list her own ${topic}`);
  for (const [name, what] of refused) assert.ok(!listed.has(name), `${what} created topic ${name}`);
  console.log('  ok: no refused run created its topic');
  alice.close();
}

// A backstop in case something hangs despite the per-call deadlines.
setTimeout(() => { console.error('node_secure: FAIL: timed out after 90 s'); process.exit(1); },
  90_000).unref();
runMain('node_secure', main);
