#!/usr/bin/env node
// Polyglot test: a Node.js client (@grpc/grpc-js + @grpc/proto-loader, loading
// proto/conduit/log/v1/log.proto at run time) exercises conduit.log.v1.LogService.
//
// Usage: node node_client.js HOST:PORT    (run_with_server.sh appends the address)
//
// Creates a uniquely named 3-partition topic, produces keyed records (keys from Kafka's murmur2
// vectors in testdata/, so their partitions are known) and keyless ones, checks the positions,
// fetches everything back and compares it (including proto3 `optional` presence: an empty key is
// not an absent key), checks status codes of bad requests, and deletes the topic. Every call has a
// deadline. Exits 0 on success, 1 with a "FAIL:" message on the first failed expectation.
//
// The packages come from tests/polyglot/node_modules (scripts/polyglot-deps.sh installs them).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

let grpc;
let protoLoader;
try {
  grpc = require('@grpc/grpc-js');
  protoLoader = require('@grpc/proto-loader');
} catch (err) {
  console.error(`node_client: FAIL: ${err.message}\n` +
    'Install the packages with scripts/polyglot-deps.sh (npm install in tests/polyglot).');
  process.exit(1);
}

const DEADLINE_MS = 10_000;
const PARTITIONS = 3;
const REPO = process.env.CONDUIT_SOURCE_DIR || path.resolve(__dirname, '..', '..');

// keepCase: field names as in the .proto. longs: Number is safe here (offsets are tiny).
// defaults: true fills unset plain scalars (partition 0, offset 0 are not on the wire) but, as
// checked here with proto-loader 0.8 / protobufjs 7, leaves proto3 `optional` fields (synthetic
// oneofs) undefined when unset, so presence stays visible: an empty key is not an absent key.
// Unset message fields (event_time) decode as null.
const LOAD_OPTIONS = {
  keepCase: true,
  longs: Number,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
  // /usr/include holds google/protobuf/{timestamp,duration}.proto (libprotobuf-dev).
  includeDirs: [path.join(REPO, 'proto'), '/usr/include'],
};

function deadline() {
  return { deadline: Date.now() + DEADLINE_MS };
}

// Calls a unary method and resolves with the response, or rejects with the grpc error.
function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, deadline(), (err, response) => (err ? reject(err) : resolve(response)));
  });
}

// Calls a unary method that must fail with status `code`.
async function expectCode(client, method, request, code, what) {
  let response;
  try {
    response = await call(client, method, request);
  } catch (err) {
    if (err.code === undefined) throw err;
    assert.equal(grpc.status[err.code], grpc.status[code],
      `${what}: expected ${grpc.status[code]}, got ${grpc.status[err.code]} (${err.details})`);
    console.log(`  ok: ${what} -> ${grpc.status[err.code]} (${err.details})`);
    return;
  }
  assert.fail(`${what}: expected ${grpc.status[code]}, but the call succeeded: ` +
    JSON.stringify(response));
}

// Kafka's default-partitioner results for 3 partitions, from testdata/kafka_murmur2.tsv.
function kafkaPartitionsFor3() {
  const out = new Map();
  for (const line of fs.readFileSync(path.join(REPO, 'testdata', 'kafka_murmur2.tsv'), 'utf8')
    .split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const [key, , p3] = line.split('\t');
    out.set(key, Number(p3));
  }
  assert.ok(out.size >= 11, `expected >= 11 murmur2 vectors, found ${out.size}`);
  return out;
}

// The content of a Record / ProduceRecord as the client sees it; null marks an absent optional.
function view(r) {
  return {
    key: r.key === undefined ? null : Buffer.from(r.key).toString('hex'),
    value: r.value === undefined ? null : Buffer.from(r.value).toString('hex'),
    headers: (r.headers || []).map((h) => [h.key, Buffer.from(h.value || []).toString('hex')]),
    event_time: r.event_time ? [Number(r.event_time.seconds), r.event_time.nanos] : null,
    event_id: r.event_id || '',  // a ProduceRecord built here may leave it unset
  };
}

async function main(address) {
  const def = protoLoader.loadSync('conduit/log/v1/log.proto', LOAD_OPTIONS);
  const LogService = grpc.loadPackageDefinition(def).conduit.log.v1.LogService;
  const client = new LogService(address, grpc.credentials.createInsecure());
  await new Promise((resolve, reject) => client.waitForReady(Date.now() + DEADLINE_MS,
    (err) => (err ? reject(new Error(`could not connect to ${address}: ${err.message}`)) : resolve())));

  const kafka = kafkaPartitionsFor3();
  const topic = `polyglot-node-${crypto.randomBytes(6).toString('hex')}`;

  // --- CreateTopic.
  const created = await call(client, 'CreateTopic', { name: topic, partitions: PARTITIONS });
  assert.equal(created.topic.name, topic, 'CreateTopic topic.name');
  assert.equal(created.topic.partitions, PARTITIONS, 'CreateTopic topic.partitions');
  assert.equal(created.topic.config.durability, 'DURABILITY_SYNC', 'default durability');
  console.log(`  ok: CreateTopic ${topic}`);

  // --- Produce keyed records (one request) and keyless records (another request).
  const eventTime = { seconds: 1_700_000_000, nanos: 654_321_000 };  // microsecond-aligned
  const keyed = [
    { key: Buffer.from('foobar'), value: Buffer.from('n0'), event_time: eventTime,
      headers: [{ key: 'lang', value: Buffer.from('node') }], event_id: 'node-0' },
    { key: Buffer.from('12'), value: Buffer.from('n1') },
    { key: Buffer.from('123'), value: Buffer.from('n2') },
    { key: Buffer.from('foobar'), value: Buffer.from('n3') },
    { key: Buffer.alloc(0), value: Buffer.from('n4') },    // empty key: present, hashed
    { key: Buffer.from('12345') },                          // no value at all
  ];
  const keyless = [{ value: Buffer.from('free-0') }, { value: Buffer.alloc(0) }];
  const r1 = await call(client, 'Produce', { topic, records: keyed });
  const r2 = await call(client, 'Produce', { topic, records: keyless });
  assert.equal(r1.positions.length, keyed.length, 'keyed Produce positions');
  assert.equal(r2.positions.length, keyless.length, 'keyless Produce positions');
  keyed.forEach((rec, i) => {
    const key = rec.key.toString();
    const want = key === '' ? 0 /* Kafka's murmur2 of no bytes gives partition 0 of 3 */ : kafka.get(key);
    assert.notEqual(want, undefined, `no Kafka vector for key ${key}`);
    assert.equal(r1.positions[i].partition, want, `record ${i} (key '${key}') partition`);
  });
  assert.equal(r2.positions[0].partition, r2.positions[1].partition,
    'keyless records of one request share a partition');

  // Offsets are dense per partition, from 0, in request order.
  const expected = new Map();  // partition -> [produce record]
  for (let p = 0; p < PARTITIONS; p++) expected.set(p, []);
  for (const [records, resp] of [[keyed, r1], [keyless, r2]]) {
    records.forEach((rec, i) => {
      const pos = resp.positions[i];
      assert.equal(pos.offset, expected.get(pos.partition).length,
        `dense offset in partition ${pos.partition}`);
      expected.get(pos.partition).push(rec);
    });
  }
  console.log('  ok: Produce placed ' + JSON.stringify(
    [...r1.positions, ...r2.positions].map((p) => [p.partition, p.offset])));

  // --- Fetch every partition back and compare.
  const stored = new Map();  // "partition/offset" -> fetched record
  for (let p = 0; p < PARTITIONS; p++) {
    const want = expected.get(p);
    const fetched = await call(client, 'Fetch', { topic, partition: p, offset: 0, max_records: 100 });
    const records = fetched.records;
    for (const r of records) stored.set(`${r.partition}/${r.offset}`, r);
    assert.equal(fetched.high_watermark, want.length, `p${p} high_watermark`);
    assert.equal(records.length, want.length, `p${p} record count`);
    records.forEach((got, off) => {
      assert.equal(got.partition, p, `p${p}@${off} partition`);
      assert.equal(got.offset, off, `p${p}@${off} offset`);
      assert.deepEqual(view(got), view(want[off]), `p${p}@${off} content`);
      assert.ok(got.append_time && Number(got.append_time.seconds) > 0, `p${p}@${off} append_time`);
    });
  }
  // proto3 `optional` presence, spelled out: empty is not absent.
  const at = (resp, i) => stored.get(`${resp.positions[i].partition}/${resp.positions[i].offset}`);
  assert.ok(Buffer.isBuffer(at(r1, 4).key) && at(r1, 4).key.length === 0, 'empty key came back absent');
  assert.equal(at(r1, 5).value, undefined, 'absent value came back present');
  assert.ok(Buffer.isBuffer(at(r2, 1).value) && at(r2, 1).value.length === 0,
    'empty value came back absent');
  assert.equal(at(r2, 0).key, undefined, 'absent key came back present');
  assert.deepEqual(at(r1, 0).event_time, eventTime, 'event_time of record 0');
  assert.equal(at(r1, 1).event_time, null, 'event_time set on a record produced without');
  console.log('  ok: Fetch returned every record intact');

  const latest = await call(client, 'ListOffsets', { topic, spec: 'OFFSET_SPEC_LATEST' });
  assert.deepEqual(
    latest.offsets.map((o) => [o.partition, o.offset]).sort((a, b) => a[0] - b[0]),
    [0, 1, 2].map((p) => [p, expected.get(p).length]), 'ListOffsets LATEST');
  console.log('  ok: ListOffsets LATEST');

  // --- Error codes.
  const hw = expected.get(0).length;
  await expectCode(client, 'Fetch', { topic, partition: 0, offset: hw + 1 },
    grpc.status.OUT_OF_RANGE, 'Fetch beyond the high watermark');
  await expectCode(client, 'CreateTopic', { name: 'bad name!', partitions: 1 },
    grpc.status.INVALID_ARGUMENT, "CreateTopic 'bad name!'");

  // --- DeleteTopic.
  await call(client, 'DeleteTopic', { name: topic });
  const listed = await call(client, 'ListTopics', {});
  assert.ok(!listed.topics.some((t) => t.name === topic), 'deleted topic still listed');
  await expectCode(client, 'Fetch', { topic, partition: 0, offset: 0 },
    grpc.status.NOT_FOUND, 'Fetch from the deleted topic');
  console.log('  ok: DeleteTopic');
  client.close();
}

const address = process.argv[process.argv.length - 1];
if (process.argv.length < 3) {
  console.error('usage: node node_client.js HOST:PORT');
  process.exit(2);
}
// A backstop in case something hangs despite the per-call deadlines.
setTimeout(() => { console.error('node_client: FAIL: timed out after 60 s'); process.exit(1); },
  60_000).unref();
main(address).then(
  () => { console.log('node_client: PASS'); },
  (err) => {
    // assert/strict messages already carry the actual-vs-expected diff.
    console.error(`node_client: FAIL: ${err && err.message ? err.message : err}`);
    if (err && err.stack && !(err instanceof assert.AssertionError)) console.error(err.stack);
    process.exit(1);
  });
