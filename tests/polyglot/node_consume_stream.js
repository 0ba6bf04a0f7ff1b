#!/usr/bin/env node
// Polyglot test and example: a Node.js worker on WorkQueue.Consume (@grpc/grpc-js +
// @grpc/proto-loader, queue.proto loaded at run time): it grants credits, handles each job pushed
// to it, and acks on the same stream, granting one more credit with each ack (one message). A
// response carries every job and answer that was ready when the queue wrote it.
//
// Usage: node node_consume_stream.js HOST:PORT    (run_with_server.sh appends the address)
//
// 500 jobs, 16 credits: every job is delivered once, never more than 16 unacked, every ack is
// answered OK with its request id, and the queue ends empty. Exits 0 on success, 1 with a
// "FAIL:" message.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');

const { requireGrpc, loadPackage, call, runMain } = require('./node_common');

const { grpc, protoLoader } = requireGrpc('node_consume_stream');
const JOBS = 500;
const CREDITS = 16;

// Runs a worker on one Consume stream until `jobs` acks are answered; resolves with what it saw.
function work(client, queue, jobs) {
  return new Promise((resolve, reject) => {
    const stream = client.Consume({ deadline: Date.now() + 60_000 });
    const delivered = new Set();
    const asked = new Map();  // request id -> job id
    let nextRequest = 0;
    let answered = 0;
    let acksSent = 0;
    let maxUnacked = 0;
    stream.on('error', reject);
    stream.on('end', () => resolve({ delivered, maxUnacked }));
    stream.on('data', (m) => {
      for (const r of m.settled) {
        assert.equal(r.code, 0, `ack of job ${r.job_id}: ${r.message}`);
        assert.equal(asked.get(r.request_id), r.job_id, 'the answer names the request');
        if (++answered === jobs) stream.end();  // half-close: ends once all are answered
      }
      for (const job of m.jobs) {
        if (delivered.has(job.job_id)) reject(new Error(`job ${job.job_id} delivered twice`));
        delivered.add(job.job_id);
        // Each ack sent grants one more credit: delivered - acks sent can never pass CREDITS.
        maxUnacked = Math.max(maxUnacked, delivered.size - acksSent);
        // The handler's work would go here; then the ack with one more credit.
        const id = ++nextRequest;
        asked.set(id, job.job_id);
        stream.write({
          request_id: id,
          ack: { job_id: job.job_id, lease_token: job.lease_token },
          credits: 1,
        });
        acksSent++;
      }
    });
    stream.write({ start: { queue, worker_id: 'node-worker', credits: CREDITS } });
  });
}

async function main(address) {
  const pb = loadPackage(grpc, protoLoader, 'conduit/queue/v1/queue.proto').conduit.queue.v1;
  const client = new pb.WorkQueue(address, grpc.credentials.createInsecure());
  const queue = `node-consume-${crypto.randomBytes(4).toString('hex')}`;
  await call(client, 'CreateQueue', { name: queue });
  const jobs = [];
  for (let i = 0; i < JOBS; i++) jobs.push({ payload: Buffer.from(`job-${i}`) });
  await call(client, 'Enqueue', { queue, jobs });

  const { delivered, maxUnacked } = await work(client, queue, JOBS);
  assert.equal(delivered.size, JOBS, 'every job delivered once');
  assert.ok(maxUnacked <= CREDITS, `at most ${CREDITS} unacked (saw ${maxUnacked})`);
  const stats = await call(client, 'GetQueueStats', { queue });
  assert.deepEqual([stats.ready, stats.leased], [0, 0], 'the queue is drained');
  console.log(`  ok: ${JOBS} jobs on one Consume stream, at most ${maxUnacked} unacked ` +
    `(${CREDITS} credits), every ack answered`);
  await call(client, 'DeleteQueue', { name: queue });
  client.close();
}

runMain('node_consume_stream', main);
