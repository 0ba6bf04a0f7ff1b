#pragma once

// Conduit's side of the peer comparison (bench/peer_bench.cc): the same workloads as the peers'
// functions in peer.h, against a conduit-standalone on 127.0.0.1:port, through gRPC.

#include <string>

#include "bench/peers/peer.h"

namespace conduit::bench::peers {

// Creates `topic` (1 partition, `durability` "sync" or "interval") and queue `queue`.
bool ConduitSetUp(int port, const std::string& topic, const std::string& durability);
// ListTopics on a server with one topic, answered on gRPC's own thread: the round-trip floor
// of one gRPC call on this machine, for comparison with the request/response workloads.
Figures ConduitPing(int port, int clients, absl::Duration run);
// Produce of one `value_bytes` record per request; `pipeline` requests in flight per client
// (1 = request/response). Latency per request.
Figures ConduitAppend(int port, const std::string& topic, int clients, int pipeline,
                      int value_bytes, absl::Duration run);
// One-record sends through client::Producer (batching with a 1 ms linger), `clients` threads
// sharing it: what an application using the client library gets. Latency send → ack.
Figures ConduitProducer(int port, const std::string& topic, int clients, int value_bytes,
                        absl::Duration run);
// One thread sending one-record messages through client::Producer without waiting for acks,
// held back only by the producer's bounded buffer (32 MiB), as kafka-producer-perf-test drives
// Kafka's producer: records acked per second, latency per record send → ack (the wait in the
// buffer included).
Figures ConduitProducerSteady(int port, const std::string& topic, int value_bytes,
                              absl::Duration run);
// Reads the topic from offset 0 with Fetch (1000 records per call): records/s.
Figures ConduitFetch(int port, const std::string& topic, absl::Duration run);
// Reads the topic from offset 0 with one Tail stream (5000 records per message) until it has
// caught up with the end, or for `run`: records/s.
Figures ConduitTail(int port, const std::string& topic, absl::Duration run);
// Work queue: pre-filled, then per round Lease (up to `batch` jobs) + Ack of each (batch 1) or
// one AckBatch of all, `clients` workers. ops = acked jobs; latency per round.
Figures ConduitQueueCycle(int port, int clients, int batch, absl::Duration run);
// Through client::Worker (`clients` threads, `batch` jobs per lease, acks sent together): what
// an application using the client library gets. ops = acked jobs.
Figures ConduitWorker(int port, int clients, int batch, absl::Duration run);

// Streams (conduit_streams.cc), written as a caller of the generated stubs would.
// One caller, one ProduceStream, one `value_bytes` record per message, written as fast as the
// stream takes them while a second thread reads the answers. ops = answered records; latency
// per message, write → answer.
Figures ConduitAppendStream(int port, const std::string& topic, int value_bytes,
                            absl::Duration run);
// Work queue: pre-filled, `clients` workers each on one Consume stream with `credits` granted
// and one more per ack: each job one pushed message and one ack message. ops = acked jobs;
// latency per job, push → ack answered.
Figures ConduitCycleStream(int port, int clients, int credits, absl::Duration run);

}  // namespace conduit::bench::peers
