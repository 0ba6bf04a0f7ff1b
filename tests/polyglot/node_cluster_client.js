#!/usr/bin/env node
// Polyglot cluster test: a Node.js client (@grpc/grpc-js + @grpc/proto-loader, loading
// proto/conduit/log/v1/log.proto at run time) routes conduit.log.v1.LogService calls in a
// three-broker cluster as proto/README.md tells a client of its own to ("Routing in a cluster,
// for clients built from generated stubs"). The same checks as python_cluster_client.py:
//
// 1. GetMetadata on the first broker until it lists every broker of the list, by address, and
//    a controller among them.
// 2. A uniquely named 6-partition topic is created through the first broker; GetMetadata on
//    every broker until each names a live leader for every partition, and all agree; then until
//    every broker has applied that placement (cluster_routing.js awaitServed: a known lag).
// 3. Per partition: a Produce (explicit partition) sent to a broker that does NOT lead it fails
//    FAILED_PRECONDITION with trailing metadata (the error's `metadata`) naming the leader's id,
//    address and epoch exactly as GetMetadata does; the same request sent to
//    `conduit-leader-address` succeeds at offset 0; a Fetch there returns the record with that
//    leader_epoch; Fetch and ListOffsets on the non-leader are refused with the same hint.
// 4. Keyed records on explicit partitions (FNV-1a of the key) routed by GetMetadata reach their
//    leader at the first try; a router holding a stale view (wrong leaders, epoch 0) is
//    corrected by one hint per partition, which it follows at once; keyed records WITHOUT a
//    partition (the broker places them by murmur2) sent to the brokers in turn are refused by
//    the non-leaders and land by following the hint; one key always lands on one partition.
// 5. Every partition read back from its leader holds exactly what was acknowledged, in order.
//
// Usage: node node_cluster_client.js [HOST:PORT,HOST:PORT,HOST:PORT]
//        (default $CONDUIT_ADDRS, which run_with_cluster.sh sets)
// Every call has a deadline. Exits 0 on success, 1 with a "FAIL:" message otherwise. The
// packages come from tests/polyglot/node_modules (scripts/polyglot-deps.sh installs them).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');

const {
  grpc, Stubs, Router, leaderHint, hintOf, expectRefused, awaitCluster, awaitPlacement,
  awaitServed,
} = require('./cluster_routing');

const PARTITIONS = 6;
const { FAILED_PRECONDITION } = grpc.status;

// 32-bit FNV-1a: the client's own key -> partition choice for explicitly placed records.
function fnv1a(bytes) {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}

const hex = (b) => (b === undefined ? null : Buffer.from(b).toString('hex'));

async function main(addresses) {
  assert.equal(addresses.length, 3, 'brokers given');
  const stubs = new Stubs();
  const brokers = await awaitCluster(stubs, addresses);
  const topic = `polyglot-node-cluster-${crypto.randomBytes(6).toString('hex')}`;
  const created = await stubs.call(addresses[0], 'CreateTopic',
    { name: topic, partitions: PARTITIONS });
  assert.equal(created.topic.partitions, PARTITIONS, 'CreateTopic topic.partitions');
  const leaders = await awaitPlacement(stubs, brokers, topic, PARTITIONS);
  assert.deepEqual([...new Set(leaders.map(([l]) => l))].sort(), [...brokers.keys()].sort(),
    `brokers leading a partition of ${topic} (placement ${JSON.stringify(leaders)})`);
  console.log(`  ok: CreateTopic ${topic} through broker ${addresses[0]}; ` +
    `leaders [id, epoch] by partition ${JSON.stringify(leaders)}`);
  const lagging = await awaitServed(stubs, brokers, topic, leaders);
  console.log(`  ok: every broker applied the placement (${lagging.length} lagging answers ` +
    `first${lagging.length ? ': ' + lagging.join(', ') : ''})`);

  // --- 3. A non-leader refuses and names the leader; following the hint succeeds.
  const expected = [...Array(PARTITIONS)].map(() => []);  // partition -> [[key hex, value hex]]
  for (let p = 0; p < PARTITIONS; p++) {
    const [leader, epoch] = leaders[p];
    const others = [...brokers.keys()].filter((id) => id !== leader).sort();
    const other = others[p % others.length];  // both non-leaders take turns
    const want = hintOf(leader, brokers.get(leader), epoch);
    const record = { partition: p, key: Buffer.from(`first-${p}`),
      value: Buffer.from(`node-first-${p}`) };
    const request = { topic, records: [record] };
    const hint = await expectRefused(stubs, brokers.get(other), 'Produce', request, want,
      `Produce p${p} to broker ${other} (leader ${leader})`);
    const resp = await stubs.call(hint['conduit-leader-address'], 'Produce', request);
    assert.deepEqual(resp.positions.map((x) => [x.partition, x.offset, x.duplicate]),
      [[p, 0, false]], `p${p}: positions of the produce that followed the hint`);
    expected[p].push([hex(record.key), hex(record.value)]);

    const fetched = await stubs.call(brokers.get(leader), 'Fetch',
      { topic, partition: p, offset: 0 });
    assert.deepEqual(
      fetched.records.map((r) => [r.partition, r.offset, hex(r.key), hex(r.value), r.leader_epoch]),
      [[p, 0, hex(record.key), hex(record.value), epoch]], `p${p}: Fetch from leader ${leader}`);
    assert.equal(fetched.high_watermark, 1, `p${p}: high watermark`);

    await expectRefused(stubs, brokers.get(other), 'Fetch', { topic, partition: p, offset: 0 },
      want, `Fetch p${p} from broker ${other}`);
    await expectRefused(stubs, brokers.get(other), 'ListOffsets',
      { topic, partitions: [p], spec: 'OFFSET_SPEC_LATEST' }, want,
      `ListOffsets p${p} from broker ${other}`);
  }
  console.log("  ok: every partition's non-leader refused with the leader's id, address and " +
    'epoch; the produce that followed the hint landed at offset 0 with its leader epoch');

  // --- 4a. Keyed records on explicit partitions, routed by GetMetadata: no refusal at all.
  const router = new Router(stubs, addresses, topic);
  await router.refresh();
  assert.deepEqual([...Array(PARTITIONS).keys()].map((p) => router.leaders.get(p)), leaders,
    "Router's view");
  for (let i = 0; i < 45; i++) {
    const key = Buffer.from(`user-${i % 9}`);
    const p = fnv1a(key) % PARTITIONS;
    const record = { partition: p, key, value: Buffer.from(`routed-${i}`) };
    const resp = await router.produce(p, [record]);
    assert.deepEqual(resp.positions.map((x) => [x.partition, x.offset]), [[p, expected[p].length]],
      `routed record ${i}: position`);
    expected[p].push([hex(key), hex(record.value)]);
  }
  assert.deepEqual([router.hintsFollowed, router.refreshes], [0, 1],
    'hints followed and metadata refreshes while routing by current metadata');
  console.log('  ok: 45 keyed records routed by GetMetadata reached their leaders at the ' +
    'first try');

  // A client holding an older view (every leader wrong, epoch 0): each partition's first produce
  // is refused with a newer epoch, which the router takes and follows at once.
  const stale = new Router(stubs, addresses, topic);
  stale.brokers = new Map(brokers);
  leaders.forEach(([leader], p) => stale.leaders.set(p,
    [Math.min(...[...brokers.keys()].filter((id) => id !== leader)), 0]));
  for (let p = 0; p < PARTITIONS; p++) {
    for (let n = 0; n < 2; n++) {
      const record = { partition: p, key: Buffer.from(`stale-${p}`),
        value: Buffer.from(`stale-${p}-${n}`) };
      const resp = await stale.produce(p, [record]);
      assert.deepEqual(resp.positions.map((x) => [x.partition, x.offset]),
        [[p, expected[p].length]], `stale-view record ${n} of p${p}: position`);
      expected[p].push([hex(record.key), hex(record.value)]);
    }
  }
  assert.deepEqual([stale.hintsFollowed, stale.refreshes], [PARTITIONS, 0],
    'hints followed and metadata refreshes with a stale view');
  assert.deepEqual([...Array(PARTITIONS).keys()].map((p) => stale.leaders.get(p)), leaders,
    'stale view, corrected');
  console.log('  ok: a stale view was corrected by one hint per partition, without a GetMetadata');

  // --- 4b. Keyed records without a partition: the broker places them (murmur2), a non-leader
  // refuses and names the leader, the client follows.
  const placed = new Map();  // key -> partition the brokers chose
  let followed = 0;
  for (let i = 0; i < 30; i++) {
    const key = Buffer.from(`free-${i % 7}`);
    const request = { topic, records: [{ key, value: Buffer.from(`placed-${i}`) }] };
    const first = addresses[i % addresses.length];
    let hint = null;
    let resp;
    try {
      resp = await stubs.call(first, 'Produce', request);
    } catch (err) {
      hint = leaderHint(err);
      if (err.code !== FAILED_PRECONDITION || hint['conduit-leader-address'] === undefined) {
        throw err;
      }
      resp = await stubs.call(hint['conduit-leader-address'], 'Produce', request);
      followed++;
    }
    assert.equal(resp.positions.length, 1, `placed record ${i}: positions`);
    const pos = resp.positions[0];
    const [leader, epoch] = leaders[pos.partition];
    if (hint === null) {
      assert.equal(first, brokers.get(leader),
        `placed record ${i} (p${pos.partition}) accepted by`);
    } else {
      assert.deepEqual(hint, hintOf(leader, brokers.get(leader), epoch),
        `placed record ${i} (p${pos.partition}): hint`);
    }
    if (!placed.has(key.toString())) placed.set(key.toString(), pos.partition);
    assert.equal(pos.partition, placed.get(key.toString()),
      `partition of key ${key} (one key, one partition)`);
    assert.equal(pos.offset, expected[pos.partition].length, `placed record ${i}: offset`);
    expected[pos.partition].push([hex(key), hex(request.records[0].value)]);
  }
  assert.ok(followed > 0,
    'no produce without a partition was refused: the hint path went untested');
  console.log(`  ok: 30 keyed records placed by the brokers; ${followed} followed a not-leader ` +
    `hint, keys ${JSON.stringify([...placed].sort())}`);

  // --- 5. Everything acknowledged is there, in order, at the leader's epoch.
  for (let p = 0; p < PARTITIONS; p++) {
    const [leader, epoch] = leaders[p];
    const fetched = await stubs.call(brokers.get(leader), 'Fetch',
      { topic, partition: p, offset: 0, max_records: 10000 });
    assert.equal(fetched.high_watermark, expected[p].length, `p${p} high watermark`);
    assert.deepEqual(fetched.records.map((r) => [r.offset, hex(r.key), hex(r.value)]),
      expected[p].map(([k, v], off) => [off, k, v]), `p${p} records in order`);
    assert.deepEqual([...new Set(fetched.records.map((r) => r.leader_epoch))], [epoch],
      `p${p} leader epochs`);
  }
  console.log(`  ok: read back ${JSON.stringify(expected.map((e) => e.length))} records per ` +
    'partition, in order');
  stubs.close();
}

const spec = process.argv.length >= 3 ? process.argv[process.argv.length - 1]
  : (process.env.CONDUIT_ADDRS || '');
const addresses = spec.split(',').filter((a) => a);
if (addresses.length === 0) {
  console.error('usage: node node_cluster_client.js HOST:PORT,HOST:PORT,...  ' +
    '(or set CONDUIT_ADDRS)');
  process.exit(2);
}
// A backstop in case something hangs despite the per-call deadlines.
setTimeout(() => {
  console.error('node_cluster_client: FAIL: timed out after 60 s');
  process.exit(1);
}, 60_000).unref();
main(addresses).then(
  () => { console.log('node_cluster_client: PASS'); },
  (err) => {
    // assert/strict messages already carry the actual-vs-expected diff.
    console.error(`node_cluster_client: FAIL: ${err && err.message ? err.message : err}`);
    if (err && err.stack && !(err instanceof assert.AssertionError)) console.error(err.stack);
    process.exit(1);
  });
