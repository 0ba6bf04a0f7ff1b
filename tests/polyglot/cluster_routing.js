// Cluster routing for the Node.js polyglot tests (@grpc/grpc-js + @grpc/proto-loader, loading
// proto/conduit/log/v1/log.proto at run time), as proto/README.md ("Routing in a cluster, for
// clients built from generated stubs") tells a client of its own to do it: one client per broker
// address, reading the conduit-leader-* trailing metadata (a failed call's `err.metadata`), a
// Router, and waits for a cluster that run_with_cluster.sh started to be ready. The Python twin
// is cluster_routing.py. The packages come from tests/polyglot/node_modules
// (scripts/polyglot-deps.sh installs them).
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');

let grpc;
let protoLoader;
try {
  grpc = require('@grpc/grpc-js');
  protoLoader = require('@grpc/proto-loader');
} catch (err) {
  console.error(`${path.basename(process.argv[1])}: FAIL: ${err.message}\n` +
    'Install the packages with scripts/polyglot-deps.sh (npm install in tests/polyglot).');
  process.exit(1);
}

const DEADLINE_MS = 10_000;
const CLUSTER_WAIT_MS = 15_000;  // leases are real etcd leases: views converge well within 1 s
const REPO = process.env.CONDUIT_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const HINT_KEYS = ['conduit-leader-id', 'conduit-leader-address', 'conduit-leader-epoch'];
const { FAILED_PRECONDITION, NOT_FOUND, UNAVAILABLE } = grpc.status;

// As node_client.js: field names as in the .proto, int64 as Number (offsets are tiny), proto3
// `optional` fields undefined when unset.
const LOAD_OPTIONS = {
  keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true,
  includeDirs: [path.join(REPO, 'proto'), '/usr/include'],
};
const LogService = grpc.loadPackageDefinition(
  protoLoader.loadSync('conduit/log/v1/log.proto', LOAD_OPTIONS)).conduit.log.v1.LogService;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One client (channel) per broker address, made and connected on first use.
class Stubs {
  constructor() { this.clients = new Map(); }

  async get(address) {
    if (!this.clients.has(address)) {
      const client = new LogService(address, grpc.credentials.createInsecure());
      await new Promise((resolve, reject) => client.waitForReady(Date.now() + DEADLINE_MS,
        (err) => (err ? reject(new Error(`could not connect to ${address}: ${err.message}`))
          : resolve())));
      this.clients.set(address, client);
    }
    return this.clients.get(address);
  }

  // Calls unary `method` on the broker at `address`; resolves with the response, rejects with
  // the grpc error (its `metadata` holds the trailers).
  async call(address, method, request) {
    const client = await this.get(address);
    return new Promise((resolve, reject) => {
      client[method](request, { deadline: Date.now() + DEADLINE_MS },
        (err, response) => (err ? reject(err) : resolve(response)));
    });
  }

  close() { for (const client of this.clients.values()) client.close(); }
}

// The conduit-leader-* trailing metadata of a failed call as {key: string}; {} without it.
function leaderHint(err) {
  const hint = {};
  if (!err || !err.metadata) return hint;
  for (const key of HINT_KEYS) {
    const [value] = err.metadata.get(key);
    if (value !== undefined) hint[key] = String(value);
  }
  return hint;
}

function hintOf(leader, address, epoch) {
  return { 'conduit-leader-id': String(leader), 'conduit-leader-address': address,
    'conduit-leader-epoch': String(epoch) };
}

// Calls `method`, which must fail FAILED_PRECONDITION naming `want` (hintOf) in its trailers;
// resolves with that hint.
async function expectRefused(stubs, address, method, request, want, what) {
  let response;
  try {
    response = await stubs.call(address, method, request);
  } catch (err) {
    if (err.code === undefined) throw err;
    assert.equal(grpc.status[err.code], 'FAILED_PRECONDITION', `${what}: ${err.details}`);
    assert.deepEqual(leaderHint(err), want, `${what}: trailing metadata`);
    console.log(`  ok: ${what} -> FAILED_PRECONDITION (${err.details})`);
    return leaderHint(err);
  }
  assert.fail(`${what}: expected FAILED_PRECONDITION, but it succeeded: ` +
    JSON.stringify(response));
}

// Calls `fn` every 50 ms until it resolves to something truthy; returns that, or fails.
async function poll(what, fn) {
  const deadline = Date.now() + CLUSTER_WAIT_MS;
  for (;;) {
    const result = await fn();
    if (result) return result;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${CLUSTER_WAIT_MS} ms`);
    await sleep(50);
  }
}

// What proto/README.md asks of a client: GetMetadata names each partition's leader; calls go
// there; a not-leader answer with a newer epoch is followed at once, any other not-leader answer
// or UNAVAILABLE refreshes the metadata and retries after a backoff. Counts what it did.
class Router {
  constructor(stubs, bootstraps, topic) {
    Object.assign(this, { stubs, bootstraps, topic });
    this.brokers = new Map();  // id -> address
    this.leaders = new Map();  // partition -> [leader id, leader epoch]
    this.hintsFollowed = 0;
    this.refreshes = 0;
  }

  async refresh() {
    this.refreshes++;
    for (const address of [...this.brokers.values(), ...this.bootstraps]) {
      let meta;
      try {
        meta = await this.stubs.call(address, 'GetMetadata', { topics: [this.topic] });
      } catch (err) {
        continue;
      }
      for (const b of meta.brokers) this.brokers.set(b.id, b.address);
      for (const p of meta.topics.length ? meta.topics[0].partitions : []) {
        const held = this.leaders.get(p.partition);
        if (!held || p.leader_epoch >= held[1]) {  // only ever move forward
          this.leaders.set(p.partition, [p.leader, p.leader_epoch]);
        }
      }
      return;
    }
    assert.fail(`GetMetadata answered by none of ${this.bootstraps}`);
  }

  // Produces `records` (all placed on `partition`) to its leader; resolves with the response.
  async produce(partition, records) {
    const request = { topic: this.topic, records };
    let last;
    for (let attempt = 0; attempt < 20; attempt++) {
      const [leader, epoch] = this.leaders.get(partition) || [-1, 0];
      if (this.brokers.has(leader)) {
        try {
          return await this.stubs.call(this.brokers.get(leader), 'Produce', request);
        } catch (err) {
          last = `${grpc.status[err.code]}: ${err.details}`;
          const hint = leaderHint(err);
          const routing = hint['conduit-leader-address'] !== undefined;
          if (err.code === FAILED_PRECONDITION && !routing) throw err;  // not about routing
          if (routing && Number(hint['conduit-leader-epoch']) > epoch) {
            const id = Number(hint['conduit-leader-id']);
            this.brokers.set(id, hint['conduit-leader-address']);
            this.leaders.set(partition, [id, Number(hint['conduit-leader-epoch'])]);
            this.hintsFollowed++;
            continue;  // news: resend there at once
          }
          if (err.code !== FAILED_PRECONDITION && err.code !== UNAVAILABLE) throw err;
        }
      }
      await sleep(100);
      await this.refresh();
    }
    assert.fail(`produce to partition ${partition}: no leader took it after 20 attempts (${last})`);
  }
}

async function awaitCluster(stubs, addresses) {
  const sorted = [...addresses].sort();
  const meta = await poll(
    `GetMetadata on ${addresses[0]} lists brokers ${addresses} and a controller among them`,
    async () => {
      const m = await stubs.call(addresses[0], 'GetMetadata', {});
      return JSON.stringify(m.brokers.map((b) => b.address).sort()) === JSON.stringify(sorted) &&
        m.brokers.some((b) => b.id === m.controller_id) && m;
    });
  assert.notEqual(meta.cluster, '', 'GetMetadata names no cluster');
  const brokers = new Map(meta.brokers.map((b) => [b.id, b.address]));
  assert.equal(brokers.size, addresses.length, 'distinct broker ids');
  assert.equal(brokers.get(meta.answered_by), addresses[0], 'GetMetadata answered_by');
  console.log(`  ok: cluster '${meta.cluster}' of brokers ${JSON.stringify([...brokers])}, ` +
    `controller ${meta.controller_id}`);
  return brokers;
}

// GetMetadata on every broker until each names a live leader for every partition and they
// agree (a broker that does not know the topic yet answers NOT_FOUND: not yet); resolves with
// [[leader id, leader epoch]] in partition order.
async function awaitPlacement(stubs, brokers, topic, partitions) {
  const view = await poll(`every broker names the same live leaders of ${topic}`, async () => {
    const views = [];
    for (const address of brokers.values()) {
      let m;
      try {
        m = await stubs.call(address, 'GetMetadata', { topics: [topic] });
      } catch (err) {
        // A broker whose view has not yet caught up with etcd does not know the topic yet.
        if (err.code === NOT_FOUND) return false;
        throw err;
      }
      const parts = m.topics.length ? m.topics[0].partitions : [];
      views.push(JSON.stringify(parts.map((p) => [p.partition, p.leader, p.leader_epoch])));
    }
    const first = JSON.parse(views[0]);
    return first.length === partitions && views.every((v) => v === views[0]) &&
      first.every(([, leader]) => brokers.has(leader)) && first;
  });
  assert.deepEqual(view.map(([p]) => p), [...Array(partitions).keys()], 'partitions in order');
  for (const [p, , epoch] of view) assert.ok(epoch >= 1, `partition ${p}: leader epoch ${epoch}`);
  return view.map(([, leader, epoch]) => [leader, epoch]);
}

// Waits until every broker has applied the placement of `topic`: ListOffsets of each partition
// answers OK on its leader and FAILED_PRECONDITION with the hint elsewhere. Resolves with the
// lagging answers (UNAVAILABLE) that came first: until a broker has applied the topic it answers
// UNAVAILABLE ("being set up on broker N; retry shortly"), never NOT_FOUND (see await_served in
// cluster_routing.py).
async function awaitServed(stubs, brokers, topic, leaders) {
  const lagging = [];
  for (let p = 0; p < leaders.length; p++) {
    const [leader] = leaders[p];
    for (const [broker, address] of [...brokers].sort((a, b) => a[0] - b[0])) {
      await poll(`broker ${broker} serves p${p} of ${topic} as its placement says`, async () => {
        let answer = 'served';
        try {
          await stubs.call(address, 'ListOffsets',
            { topic, partitions: [p], spec: 'OFFSET_SPEC_LATEST' });
        } catch (err) {
          if (err.code === UNAVAILABLE) {
            lagging.push(`broker ${broker} p${p}: ${grpc.status[err.code]}`);
            return false;
          }
          if (err.code !== FAILED_PRECONDITION || !leaderHint(err)['conduit-leader-address']) {
            throw err;
          }
          answer = 'refused with a hint';
        }
        assert.equal(answer, broker === leader ? 'served' : 'refused with a hint',
          `ListOffsets p${p} on broker ${broker} (leader ${leader})`);
        return true;
      });
    }
  }
  return lagging;
}

module.exports = {
  grpc, DEADLINE_MS, Stubs, Router, leaderHint, hintOf, expectRefused, poll, awaitCluster,
  awaitPlacement, awaitServed,
};
