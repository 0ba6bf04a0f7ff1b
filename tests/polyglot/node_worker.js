#!/usr/bin/env node
// Polyglot test: a Node.js queue worker (@grpc/grpc-js + @grpc/proto-loader, loading
// proto/conduit/queue/v1/queue.proto at run time) against conduit.queue.v1.WorkQueue.
//
// Usage: node node_worker.js HOST:PORT    (run_with_server.sh appends the address)
//
// Creates a queue, enqueues three jobs, then works like a real worker: long-poll Lease, ack the
// good jobs, nack the poison one permanently, and checks that it sits in the dead-letter lane
// with its attempt, that a stale token is refused with FAILED_PRECONDITION, and the stats; then
// leases a batch and acks it with one AckBatch (a result per job). Every call has a deadline. Exits 0 on success, 1 with a "FAIL:" message otherwise.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');

let grpc;
let protoLoader;
try {
  grpc = require('@grpc/grpc-js');
  protoLoader = require('@grpc/proto-loader');
} catch (err) {
  console.error(`node_worker: FAIL: ${err.message}\n` +
    'Install the packages with scripts/polyglot-deps.sh (npm install in tests/polyglot).');
  process.exit(1);
}

const REPO = process.env.CONDUIT_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const DEADLINE_MS = 15_000;

function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + DEADLINE_MS },
      (err, response) => (err ? reject(err) : resolve(response)));
  });
}

async function main() {
  const address = process.argv[2];
  assert.ok(address, 'usage: node_worker.js HOST:PORT');
  const definition = protoLoader.loadSync('conduit/queue/v1/queue.proto', {
    keepCase: true, longs: String, enums: String, bytes: Buffer, defaults: true, oneofs: true,
    includeDirs: [path.join(REPO, 'proto'), '/usr/include'],
  });
  const pkg = grpc.loadPackageDefinition(definition).conduit.queue.v1;
  const client = new pkg.WorkQueue(address, grpc.credentials.createInsecure());

  const queue = `node-${process.pid}`;
  await call(client, 'CreateQueue', { name: queue, config: { max_attempts: 3 } });
  const enqueued = await call(client, 'Enqueue', {
    queue,
    jobs: [
      { payload: Buffer.from('resize image 1'), tenant: 'shop-a' },
      { payload: Buffer.from('poison'), tenant: 'shop-a' },
      { payload: Buffer.from('resize image 2'), tenant: 'shop-b', headers: [{ key: 'k', value: Buffer.from('v') }] },
    ],
  });
  assert.equal(enqueued.jobs.length, 3);

  let acked = 0;
  let poisonId = null;
  let staleChecked = false;
  while (acked + (poisonId ? 1 : 0) < 3) {
    const leased = await call(client, 'Lease', {
      queue, worker_id: 'node-worker', max_jobs: 2, max_wait: { seconds: 5 },
    });
    assert.ok(leased.jobs.length > 0, 'a job within the long-poll');
    for (const job of leased.jobs) {
      assert.equal(job.attempt, 1);
      assert.ok(job.lease_token.length > 0);
      if (job.payload.toString() === 'poison') {
        const nacked = await call(client, 'Nack', {
          queue, job_id: job.job_id, lease_token: job.lease_token,
          reason: 'cannot decode image', failure_class: 'FAILURE_CLASS_PERMANENT',
        });
        assert.equal(nacked.dead, true);
        poisonId = job.job_id;
        continue;
      }
      await call(client, 'Ack', { queue, job_id: job.job_id, lease_token: job.lease_token });
      acked += 1;
      if (!staleChecked) {
        // Acking again with the same token changes nothing and says why.
        await assert.rejects(
          call(client, 'Ack', { queue, job_id: job.job_id, lease_token: job.lease_token }),
          (err) => err.code === grpc.status.NOT_FOUND);
        staleChecked = true;
      }
    }
  }
  const dead = await call(client, 'GetDeadLetter', { queue, job_id: poisonId });
  assert.equal(dead.dead_letter.payload.toString(), 'poison');
  assert.match(dead.dead_letter.reason, /cannot decode image/);
  assert.equal(dead.dead_letter.attempts.length, 1);
  assert.equal(dead.dead_letter.attempts[0].worker_id, 'node-worker');
  assert.equal(dead.dead_letter.attempts[0].outcome, 'OUTCOME_NACKED');

  const stats = await call(client, 'GetQueueStats', { queue });
  assert.equal(Number(stats.ready), 0);
  assert.equal(Number(stats.leased), 0);
  assert.equal(Number(stats.dead), 1);

  await assert.rejects(
    call(client, 'Nack', { queue, job_id: poisonId, lease_token: 'stale' }),
    (err) => err.code === grpc.status.FAILED_PRECONDITION);

  // A batch: lease three jobs at once and ack them with one AckBatch, one token stale.
  await call(client, 'Enqueue', {
    queue, jobs: ['a', 'b', 'c'].map((p) => ({ payload: Buffer.from(p) })),
  });
  const batch = await call(client, 'Lease', { queue, worker_id: 'node-worker', max_jobs: 3 });
  assert.equal(batch.jobs.length, 3);
  const entries = batch.jobs.map((j) => ({ job_id: j.job_id, lease_token: j.lease_token }));
  entries[1].lease_token = 'stale';
  const results = await call(client, 'AckBatch', { queue, jobs: entries });
  assert.deepEqual(results.results.map((r) => r.code), [0, grpc.status.FAILED_PRECONDITION, 0]);
  assert.equal(results.results[1].job_id, batch.jobs[1].job_id);
  await assert.rejects(  // a job listed twice: the whole call is refused
    call(client, 'AckBatch', { queue, jobs: [entries[0], entries[0]] }),
    (err) => err.code === grpc.status.INVALID_ARGUMENT);
  const after = await call(client, 'GetQueueStats', { queue });
  assert.equal(Number(after.leased), 1, 'only the stale-token job is still leased');
  await call(client, 'DeleteQueue', { name: queue });
  client.close();
  console.log('node_worker: PASS');
}

main().catch((err) => {
  console.error(`node_worker: FAIL: ${err.stack || err}`);
  process.exit(1);
});
