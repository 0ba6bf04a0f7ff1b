// bench/peers/peer.h
#pragma once
#include <cstdint>
#include <string>
#include "absl/time/time.h"
#include "bench/histogram.h"   // conduit::bench::LatencyHistogram (read it: Record(ns), Merge, Quantile)
namespace conduit::bench::peers {
struct Figures {
  double ops_per_s = 0;        // completed operations (records appended / cycles) per second
  LatencyHistogram latency;    // per operation (or per pipelined batch, see each function), ns
  uint64_t errors = 0;
  std::string error;           // first error text, if any
};
// Redis Streams. XADD <stream> * v <value_bytes bytes>, `clients` connections each in its own thread;
// `pipeline` commands in flight per connection (1 = request/response). Latency: per command
// (pipeline 1) or per pipelined round (pipeline > 1).
Figures RedisXadd(int port, int clients, int pipeline, int value_bytes, absl::Duration run);
// Consume cycle: the stream is pre-filled (enough for the run), a consumer group reads with
// XREADGROUP GROUP g c<i> COUNT 1 STREAMS s > and acknowledges with XACK; ops = acked records.
Figures RedisReadAck(int port, int clients, int value_bytes, absl::Duration run);
// The same cycle taking up to `batch` records per round: XREADGROUP ... COUNT <batch>, then one
// XACK for every id read; ops = acked records, latency per round.
Figures RedisReadAckBatch(int port, int clients, int batch, int value_bytes, absl::Duration run);
// NATS JetStream (another file). window 1 = synchronous publish with ack; >1 = async publish
// with up to `window` acks outstanding per connection. The stream (file storage) is created
// fresh with `replicas` copies (3 on a clustered JetStream: a Raft group per stream).
Figures NatsPublish(int port, int clients, int window, int value_bytes, absl::Duration run,
                    int replicas = 1);
// Work-queue pull + ack cycle on a WorkQueue-retention stream: fetch 1, ack, repeat.
Figures NatsWorkQueueCycle(int port, int clients, absl::Duration run);
// The same cycle pulling up to `batch` messages per request, then AckSync for each (all sent at
// once, then all confirmations read); ops = acked messages, latency per round.
Figures NatsWorkQueueCycleBatch(int port, int clients, int batch, absl::Duration run);
// beanstalkd: put <pri> 0 <ttr> <bytes> per job; latency per put.
Figures BeanstalkPut(int port, int clients, int value_bytes, absl::Duration run);
// Reserve + delete cycle on pre-filled jobs (reserve-with-timeout 1, delete <id>); ops = cycles.
Figures BeanstalkReserveDelete(int port, int clients, absl::Duration run, double prefill_rate = 0);
// beanstalkd has no batch reserve: `batch` reserve-with-timeout 0 pipelined in one write, then
// their deletes in another; ops = deleted jobs, latency per round.
Figures BeanstalkReserveDeleteBatch(int port, int clients, int batch, absl::Duration run,
                                    double prefill_rate = 0);
}  // namespace conduit::bench::peers
