// What the Node stream tests share (node_produce_stream.js, node_consume_stream.js): the
// packages from tests/polyglot/node_modules (scripts/polyglot-deps.sh), a proto's package loaded
// at run time, a unary call as a promise, and the test's exit status.
'use strict';

const path = require('node:path');

const REPO = process.env.CONDUIT_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const DEADLINE_MS = 10_000;

// The gRPC packages, or exit 1 with how to install them.
function requireGrpc(name) {
  try {
    return { grpc: require('@grpc/grpc-js'), protoLoader: require('@grpc/proto-loader') };
  } catch (err) {
    console.error(`${name}: FAIL: ${err.message}\n` +
      'Install the packages with scripts/polyglot-deps.sh (npm install in tests/polyglot).');
    process.exit(1);
  }
}

// The package of `protoFile` (relative to proto/), e.g. loadPackage(grpc, loader,
// 'conduit/log/v1/log.proto').conduit.log.v1. Longs as Number (offsets and ids are small here).
function loadPackage(grpc, protoLoader, protoFile) {
  const definition = protoLoader.loadSync(path.join(REPO, 'proto', protoFile), {
    keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true,
    includeDirs: [path.join(REPO, 'proto'), '/usr/include'],
  });
  return grpc.loadPackageDefinition(definition);
}

// A unary call with a deadline, as a promise.
function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + DEADLINE_MS },
      (err, response) => (err ? reject(err) : resolve(response)));
  });
}

// Runs main(address) with the address from the last argument; PASS, or FAIL and exit 1.
function runMain(name, main) {
  const address = process.argv[process.argv.length - 1];
  main(address).then(() => console.log(`${name}: PASS`), (err) => {
    console.error(`${name}: FAIL: ${err.stack || err}`);
    process.exit(1);
  });
}

module.exports = { requireGrpc, loadPackage, call, runMain };
