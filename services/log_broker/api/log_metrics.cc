#include "services/log_broker/api/log_metrics.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "common/logging/logging.h"
#include "common/metrics/metrics.h"

namespace conduit::log_broker::api {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

}  // namespace

LogMetrics::LogMetrics(prometheus::Registry& registry)
    : records_produced_(BuildCounter()
                            .Name("conduit_log_records_produced_total")
                            .Help("Records appended, by topic")
                            .Register(registry)),
      bytes_produced_(BuildCounter()
                          .Name("conduit_log_bytes_produced_total")
                          .Help("Payload bytes appended, by topic")
                          .Register(registry)),
      records_fetched_(BuildCounter()
                           .Name("conduit_log_records_fetched_total")
                           .Help("Records returned by Fetch and Tail, by topic")
                           .Register(registry)),
      bytes_fetched_(BuildCounter()
                         .Name("conduit_log_bytes_fetched_total")
                         .Help("Payload bytes returned by Fetch and Tail, by topic")
                         .Register(registry)),
      high_watermark_(BuildGauge()
                          .Name("conduit_log_high_watermark")
                          .Help("Next offset to be written, by topic and partition")
                          .Register(registry)),
      duplicates_(BuildCounter()
                      .Name("conduit_log_duplicates_dropped_total")
                      .Help("Records not appended again: idempotent retries and dedup-window hits")
                      .Register(registry)),
      records_removed_(BuildCounter()
                           .Name("conduit_log_records_removed_total")
                           .Help("Records removed by retention or compaction, by topic and reason")
                           .Register(registry)),
      truncations_(BuildCounter()
                       .Name("conduit_log_truncations_total")
                       .Help("Follower log truncations (a divergent suffix cut), by topic")
                       .Register(registry)),
      isr_changes_(BuildCounter()
                       .Name("conduit_log_isr_changes_total")
                       .Help("In-sync set changes the leader wrote, by kind (shrink, expand) "
                             "and result (ok, failed)")
                       .Register(registry)),
      follower_lag_records_(BuildGauge()
                                .Name("conduit_log_follower_lag_records")
                                .Help("On the leader: its log end minus each follower's durable "
                                      "log end as last fetched, by topic, partition, follower")
                                .Register(registry)),
      follower_lag_seconds_(BuildGauge()
                                .Name("conduit_log_follower_lag_seconds")
                                .Help("On the leader: seconds since each follower was last caught "
                                      "up with its log end, by topic, partition, follower")
                                .Register(registry)),
      produce_parked_(BuildCounter()
                          .Name("conduit_log_produce_parked_total")
                          .Help("Idempotent produce requests that arrived ahead of an earlier "
                                "batch and waited for it (the reorder wait)")
                          .Register(registry)
                          .Add({})),
      produce_latency_(BuildHistogram()
                           .Name("conduit_log_produce_latency_seconds")
                           .Help("Produce RPC latency, receipt to durable ack")
                           .Register(registry)
                           .Add({}, metrics::LatencyBuckets())),
      fetch_latency_(BuildHistogram()
                         .Name("conduit_log_fetch_latency_seconds")
                         .Help("Fetch RPC latency, including long-poll waits")
                         .Register(registry)
                         .Add({}, metrics::LatencyBuckets())),
      batch_requests_(BuildHistogram()
                          .Name("conduit_log_group_commit_requests")
                          .Help("Produce requests per group-committed write")
                          .Register(registry)
                          .Add({}, metrics::CountBuckets())),
      batch_records_(BuildHistogram()
                         .Name("conduit_log_group_commit_records")
                         .Help("Records per group-committed write")
                         .Register(registry)
                         .Add({}, metrics::CountBuckets())),
      wal_sync_latency_(BuildHistogram()
                            .Name("conduit_log_wal_sync_seconds")
                            .Help("Latency of writes that fsync the WAL, and of background syncs")
                            .Register(registry)
                            .Add({}, metrics::LatencyBuckets())) {
  auto& requests = BuildCounter()
                       .Name("conduit_log_produce_requests_total")
                       .Help("Produce calls by final gRPC status code")
                       .Register(registry);
  for (int i = 0; i < kCodes; ++i) {
    produce_requests_[i] =
        &requests.Add({{"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(i))}});
  }
}

void LogMetrics::OnBatchWritten(int requests, int records, bool synced, absl::Duration latency) {
  batch_requests_.Observe(requests);
  batch_records_.Observe(records);
}

void LogMetrics::OnWalSynced(absl::Duration latency) {
  wal_sync_latency_.Observe(absl::ToDoubleSeconds(latency));
}

LogMetrics::TopicMetrics& LogMetrics::ForTopic(const std::string& topic) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) {
    const prometheus::Labels labels{{"topic", topic}};
    it = topics_
             .emplace(topic, TopicMetrics{&records_produced_.Add(labels), &bytes_produced_.Add(labels),
                                          &records_fetched_.Add(labels), &bytes_fetched_.Add(labels),
                                          &duplicates_.Add(labels)})
             .first;
  }
  return it->second;
}

void LogMetrics::OnProduced(const std::string& topic, int64_t records, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  TopicMetrics& m = ForTopic(topic);
  m.records_produced->Increment(static_cast<double>(records));
  m.bytes_produced->Increment(static_cast<double>(bytes));
}

void LogMetrics::OnFetched(const std::string& topic, int64_t records, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  TopicMetrics& m = ForTopic(topic);
  m.records_fetched->Increment(static_cast<double>(records));
  m.bytes_fetched->Increment(static_cast<double>(bytes));
}

void LogMetrics::OnDuplicatesDropped(const std::string& topic, int64_t records) {
  absl::MutexLock lock(&mu_);
  ForTopic(topic).duplicates->Increment(static_cast<double>(records));
}

void LogMetrics::OnHighWatermark(const std::string& topic, int32_t partition, int64_t hw) {
  absl::MutexLock lock(&mu_);
  auto key = std::make_pair(topic, partition);
  auto it = high_watermarks_.find(key);
  if (it == high_watermarks_.end()) {
    it = high_watermarks_
             .emplace(key, &high_watermark_.Add(
                               {{"topic", topic}, {"partition", std::to_string(partition)}}))
             .first;
  }
  it->second->Set(static_cast<double>(hw));
}

void LogMetrics::OnRecordsRemoved(const std::string& topic, bool compaction, int64_t records,
                                  int64_t bytes) {
  records_removed_.Add({{"topic", topic}, {"reason", compaction ? "compaction" : "retention"}})
      .Increment(static_cast<double>(records));
}

void LogMetrics::OnTopicDeleted(const std::string& topic, int32_t partitions) {
  absl::MutexLock lock(&mu_);
  if (auto it = topics_.find(topic); it != topics_.end()) {
    records_produced_.Remove(it->second.records_produced);
    bytes_produced_.Remove(it->second.bytes_produced);
    records_fetched_.Remove(it->second.records_fetched);
    bytes_fetched_.Remove(it->second.bytes_fetched);
    duplicates_.Remove(it->second.duplicates);
    topics_.erase(it);
  }
  for (int32_t p = 0; p < partitions; ++p) {
    if (auto it = high_watermarks_.find(std::make_pair(topic, p)); it != high_watermarks_.end()) {
      high_watermark_.Remove(it->second);
      high_watermarks_.erase(it);
    }
  }
  for (const char* reason : {"compaction", "retention"}) {
    records_removed_.Remove(&records_removed_.Add({{"topic", topic}, {"reason", reason}}));
  }
}

void LogMetrics::OnTruncated(const std::string& topic, int32_t partition, int64_t offset,
                             const std::string& reason) {
  truncations_.Add({{"topic", topic}}).Increment();
  spdlog::warn("replica: {}/{} truncated to offset {}: {}", topic, partition, offset, reason);
}

void LogMetrics::OnInSyncChange(const std::string& topic, int32_t partition,
                                const std::vector<int32_t>& from, const std::vector<int32_t>& to,
                                const absl::Status& written) {
  const bool shrink = to.size() < from.size();
  isr_changes_
      .Add({{"kind", shrink ? "shrink" : "expand"}, {"result", written.ok() ? "ok" : "failed"}})
      .Increment();
  spdlog::info("replica: {}/{} in-sync replicas [{}] -> [{}]: {}", topic, partition,
               absl::StrJoin(from, ","), absl::StrJoin(to, ","),
               written.ok() ? "written" : written.ToString());
}

void LogMetrics::OnReplication(const std::vector<PartitionReplication>& led) {
  absl::MutexLock lock(&lag_mu_);
  absl::flat_hash_map<std::tuple<std::string, int32_t, int32_t>, FollowerGauges> next;
  for (const PartitionReplication& p : led) {
    for (const FollowerLag& f : p.replication.followers) {
      auto key = std::make_tuple(p.topic, p.partition, f.broker);
      FollowerGauges gauges;
      if (auto it = follower_lag_.find(key); it != follower_lag_.end()) {
        gauges = it->second;
        follower_lag_.erase(it);
      } else {
        const prometheus::Labels labels{{"topic", p.topic},
                                        {"partition", std::to_string(p.partition)},
                                        {"follower", std::to_string(f.broker)}};
        gauges = {&follower_lag_records_.Add(labels), &follower_lag_seconds_.Add(labels)};
      }
      gauges.records->Set(static_cast<double>(f.lag_records));
      gauges.seconds->Set(absl::ToDoubleSeconds(f.since_caught_up));
      next.emplace(std::move(key), gauges);
    }
  }
  for (auto& [key, gauges] : follower_lag_) {  // no longer led here (or no longer a follower)
    follower_lag_records_.Remove(gauges.records);
    follower_lag_seconds_.Remove(gauges.seconds);
  }
  follower_lag_ = std::move(next);
}

}  // namespace conduit::log_broker::api
