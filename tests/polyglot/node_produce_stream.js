#!/usr/bin/env node
// Polyglot test and example: LogService.ProduceStream from Node.js (@grpc/grpc-js +
// @grpc/proto-loader, log.proto loaded at run time), the way an application with one record at a
// time uses it: one long-lived stream, one record per message, answers matched by the message's
// sequence number.
//
// Usage: node node_produce_stream.js HOST:PORT    (run_with_server.sh appends the address)
//
// 5,000 one-record messages written as fast as the stream takes them (honouring write()'s
// backpressure), idempotent (a sequence per partition): every answer arrives in message order,
// offsets are dense per partition, and the log holds each value once. Exits 0 on success, 1 with
// a "FAIL:" message.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');

const { requireGrpc, loadPackage, call, runMain } = require('./node_common');

const { grpc, protoLoader } = requireGrpc('node_produce_stream');
const PARTITIONS = 3;
const MESSAGES = 5000;

// Writes `messages` to a ProduceStream, waiting for 'drain' when write() says the buffer is full,
// and resolves with the answers in the order they arrived (a response carries every answer that
// was ready when the broker wrote it).
function produceStream(client, messages) {
  return new Promise((resolve, reject) => {
    const answers = [];
    const stream = client.ProduceStream({ deadline: Date.now() + 60_000 });
    stream.on('data', (response) => answers.push(...response.answers));
    stream.on('error', reject);
    stream.on('end', () => resolve(answers));
    let i = 0;
    const writeSome = () => {
      while (i < messages.length) {
        if (!stream.write(messages[i++])) {
          stream.once('drain', writeSome);
          return;
        }
      }
      stream.end();
    };
    writeSome();
  });
}

async function main(address) {
  const pb = loadPackage(grpc, protoLoader, 'conduit/log/v1/log.proto').conduit.log.v1;
  const client = new pb.LogService(address, grpc.credentials.createInsecure());
  const topic = `node-stream-${crypto.randomBytes(4).toString('hex')}`;
  await call(client, 'CreateTopic', { name: topic, partitions: PARTITIONS });
  const producer = await call(client, 'InitProducer', {});

  const nextSequence = new Array(PARTITIONS).fill(0);
  const messages = [];
  for (let n = 0; n < MESSAGES; n++) {
    const partition = n % PARTITIONS;
    messages.push({
      sequence: n,
      request: {
        topic,
        producer_id: producer.producer_id,
        producer_epoch: producer.producer_epoch,
        records: [{ partition, value: Buffer.from(`v${n}`) }],
        sequences: [{ partition, base_sequence: nextSequence[partition]++ }],
      },
    });
  }
  const started = Date.now();
  const answers = await produceStream(client, messages);
  const seconds = (Date.now() - started) / 1000;
  assert.equal(answers.length, MESSAGES, 'one answer per message');
  const nextOffset = new Array(PARTITIONS).fill(0);
  answers.forEach((a, n) => {
    assert.equal(a.sequence, n, 'answers in message order');
    assert.equal(a.code, 0, `message ${n}: ${a.message}`);
    const pos = a.positions[0];
    assert.equal(pos.partition, n % PARTITIONS);
    assert.equal(pos.offset, nextOffset[pos.partition]++, 'dense offsets in send order');
  });
  const described = await call(client, 'DescribeTopic', { name: topic });
  const total = described.partitions.reduce((sum, p) => sum + p.high_watermark, 0);
  assert.equal(total, MESSAGES, 'each record once in the log');
  console.log(`  ok: ${MESSAGES} one-record messages answered in order, dense offsets ` +
    `(${Math.round(MESSAGES / seconds)} records/s through one stream)`);
  await call(client, 'DeleteTopic', { name: topic });
  client.close();
}

runMain('node_produce_stream', main);
