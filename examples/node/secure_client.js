#!/usr/bin/env node
// A Conduit client over TLS with a bearer token on every call.
//
//     export CONDUIT_TOKEN=...            # the token the server's --auth-token-file knows
//     node examples/node/secure_client.js --ca certs/dev/ca.pem \
//       --cert certs/dev/worker.pem --key certs/dev/worker.key 127.0.0.1:7070
//
// It trusts the server's certificate authority (--ca), presents a client certificate when it has
// one (--cert and --key: mutual TLS, for a server started with --tls-client-ca) and sends
// `authorization: Bearer <token>` with every call. Then it does what a service does:
//   1. creates topic "secure.orders" (keeps it if it exists) and produces two records,
//   2. fetches them back,
//   3. creates queue "secure.emails" (keeps it if it exists), enqueues a job, leases it, acks it.
//
// Settings come from the arguments or the environment: the address (last argument,
// $CONDUIT_ADDRESS), --ca ($CONDUIT_TLS_CA), --cert ($CONDUIT_TLS_CERT), --key ($CONDUIT_TLS_KEY),
// and the token from --token-file or $CONDUIT_TOKEN (never an argument: `ps` would show it).
//
// Who the caller is, the server decides: the principal of the token (its line in the token file)
// or, without a token, of the client certificate (User:<URI SAN or CN>). What it may do, the
// server's ACLs decide; for this example, for instance:
//     allow User:alice topic prefixed secure. Create,Write,Read,ViewPayload
//     allow User:alice queue prefixed secure. Create,Write,Read
// An unknown token fails with UNAUTHENTICATED, a missing grant with PERMISSION_DENIED, a plaintext
// connection or (when the server requires one) a missing client certificate with UNAVAILABLE.
//
// Packages: @grpc/grpc-js and @grpc/proto-loader, the versions pinned by
// tests/polyglot/package.json (scripts/polyglot-deps.sh installs them into
// tests/polyglot/node_modules; this file loads them from there by path). The protos are loaded
// at run time from proto/ and /usr/include (google/protobuf/*.proto, apt libprotobuf-dev).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const REPO = process.env.CONDUIT_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const NODE_MODULES = path.join(REPO, 'tests', 'polyglot', 'node_modules');
let grpc;
let protoLoader;
try {
  grpc = require(path.join(NODE_MODULES, '@grpc', 'grpc-js'));
  protoLoader = require(path.join(NODE_MODULES, '@grpc', 'proto-loader'));
} catch (err) {
  console.error(`secure_client: ${err.message}\n` +
    'Install the packages with scripts/polyglot-deps.sh (npm install in tests/polyglot).');
  process.exit(1);
}

const TOPIC = 'secure.orders';
const QUEUE = 'secure.emails';
const DEADLINE_MS = 10_000;  // every call has a deadline
const RECORDS = [
  { key: 'order-1001', value: '{"total": "25.99"}' },
  { key: 'order-1002', value: '{"total": "7.50"}' },
];
const JOB = '{"to": "alice@example.com", "template": "receipt", "order": 1001}';

// TLS that trusts the CA in `ca`, presents the client certificate `cert` with its key `key` when
// both are given, and sends `token` as a bearer token on every call when one is given.
function channelCredentials({ ca, cert, key, token }) {
  const tls = grpc.credentials.createSsl(fs.readFileSync(ca),
    key ? fs.readFileSync(key) : null, cert ? fs.readFileSync(cert) : null);
  if (!token) return tls;
  // Adds "authorization: Bearer <token>" to each call's metadata. grpc-js combines call
  // credentials only with secure channel credentials, so the token never leaves in plaintext.
  const bearer = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    callback(null, metadata);
  });
  return grpc.credentials.combineChannelCredentials(tls, bearer);
}

// Clients of the log and the queue at `address` ("host:port"; the server's certificate must name
// the host). With an IP address Node warns once (DEP0123) that the TLS server name is an IP:
// grpc-js sends the host as the server name (grpc/grpc-node#1919). The certificate is still
// checked against the IP; with a host name there is no warning.
function connect(address, credentials) {
  // keepCase: field names as in the .proto; longs as Numbers (offsets and job ids are small here).
  const protos = ['conduit/log/v1/log.proto', 'conduit/queue/v1/queue.proto'];
  const definition = protoLoader.loadSync(protos, {
    keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true,
    includeDirs: [path.join(REPO, 'proto'), '/usr/include'],
  });
  const conduit = grpc.loadPackageDefinition(definition).conduit;
  const log = new conduit.log.v1.LogService(address, credentials);
  const work = new conduit.queue.v1.WorkQueue(address, credentials);
  return { log, work, close() { log.close(); work.close(); } };
}

// A unary call with a deadline, as a promise.
function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + DEADLINE_MS },
      (err, response) => (err ? reject(err) : resolve(response)));
  });
}

// Creates with `method` unless it exists already; true when it was created.
async function createUnlessExists(client, method, request) {
  try {
    await call(client, method, request);
    return true;
  } catch (err) {
    if (err.code === grpc.status.ALREADY_EXISTS) return false;
    throw err;
  }
}

// Produces RECORDS to `topic` and fetches them back, then runs one job through `queue` (enqueue,
// lease, ack); creates the topic and the queue when they do not exist. Rejects with the gRPC
// error (err.code, err.details) of a call that fails.
async function run({ log, work }, { topic = TOPIC, queue = QUEUE } = {}) {
  // 1. A topic, and two records in it.
  if (await createUnlessExists(log, 'CreateTopic', { name: topic, partitions: 1 })) {
    console.log(`created topic ${topic}`);
  }
  const produced = await call(log, 'Produce', {
    topic, records: RECORDS.map((r) => ({ key: Buffer.from(r.key), value: Buffer.from(r.value) })),
  });
  const first = produced.positions[0];
  console.log(`produced ${RECORDS.length} records to ${topic} partition ${first.partition} ` +
    `from offset ${first.offset}`);

  // 2. The same records, fetched back.
  const fetched = await call(log, 'Fetch', {
    topic, partition: first.partition, offset: first.offset, max_records: RECORDS.length,
  });
  // A value comes back only to a caller allowed to ViewPayload on the topic.
  const records = fetched.records.map((r) => ({
    offset: r.offset, key: r.key.toString(), value: r.value && r.value.toString(),
  }));
  for (const r of records) console.log(`  offset ${r.offset}: ${r.key} = ${r.value}`);

  // 3. A queue, and one job through it.
  if (await createUnlessExists(work, 'CreateQueue', { name: queue })) {
    console.log(`created queue ${queue}`);
  }
  const enqueued = await call(work, 'Enqueue', { queue, jobs: [{ payload: Buffer.from(JOB) }] });
  const jobId = enqueued.jobs[0].job_id;
  console.log(`enqueued job ${jobId}`);
  const leased = await call(work, 'Lease', {
    queue, worker_id: 'secure-client', max_jobs: 1, max_wait: { seconds: 5 },
  });
  if (leased.jobs.length === 0) throw new Error(`no job to lease from queue ${queue} after 5 s`);
  const job = leased.jobs[0];
  console.log(`leased job ${job.job_id} (attempt ${job.attempt}): ${job.payload.toString()}`);
  await call(work, 'Ack', { queue, job_id: job.job_id, lease_token: job.lease_token });
  console.log(`acked job ${job.job_id}`);
  return {
    records, enqueuedJobId: jobId, leasedJobId: job.job_id, jobPayload: job.payload.toString(),
  };
}

async function main() {
  const env = process.env;
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      ca: { type: 'string', default: env.CONDUIT_TLS_CA || '' },
      cert: { type: 'string', default: env.CONDUIT_TLS_CERT || '' },
      key: { type: 'string', default: env.CONDUIT_TLS_KEY || '' },
      'token-file': { type: 'string' },
      topic: { type: 'string', default: TOPIC },
      queue: { type: 'string', default: QUEUE },
    },
  });
  const address = positionals[positionals.length - 1] || env.CONDUIT_ADDRESS || '127.0.0.1:7070';
  if (!values.ca) throw new Error('--ca (or $CONDUIT_TLS_CA) is required');
  if (!values.cert !== !values.key) throw new Error('--cert and --key go together');
  const token = values['token-file']
    ? fs.readFileSync(values['token-file'], 'utf8').trim() : env.CONDUIT_TOKEN || '';

  const clients = connect(address,
    channelCredentials({ ca: values.ca, cert: values.cert, key: values.key, token }));
  try {
    await run(clients, { topic: values.topic, queue: values.queue });
  } finally {
    clients.close();
  }
}

module.exports = { grpc, channelCredentials, connect, call, run, TOPIC, QUEUE, RECORDS, JOB };

if (require.main === module) {
  main().catch((err) => {
    console.error(err.code === undefined ? `secure_client: ${err.message}`
      : `secure_client: ${grpc.status[err.code]}: ${err.details}`);
    process.exit(1);
  });
}
