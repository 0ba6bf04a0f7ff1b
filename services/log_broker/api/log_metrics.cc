#include "services/log_broker/api/log_metrics.h"

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
                            .Add({}, metrics::LatencyBuckets())) {}

void LogMetrics::OnBatchWritten(int requests, int records, bool synced, absl::Duration latency) {
  batch_requests_.Observe(requests);
  batch_records_.Observe(records);
}

void LogMetrics::OnWalSynced(absl::Duration latency) {
  wal_sync_latency_.Observe(absl::ToDoubleSeconds(latency));
}

void LogMetrics::OnProduced(const std::string& topic, int64_t records, int64_t bytes) {
  records_produced_.Add({{"topic", topic}}).Increment(static_cast<double>(records));
  bytes_produced_.Add({{"topic", topic}}).Increment(static_cast<double>(bytes));
}

void LogMetrics::OnFetched(const std::string& topic, int64_t records, int64_t bytes) {
  records_fetched_.Add({{"topic", topic}}).Increment(static_cast<double>(records));
  bytes_fetched_.Add({{"topic", topic}}).Increment(static_cast<double>(bytes));
}

void LogMetrics::OnHighWatermark(const std::string& topic, int32_t partition, int64_t hw) {
  high_watermark_.Add({{"topic", topic}, {"partition", std::to_string(partition)}})
      .Set(static_cast<double>(hw));
}

void LogMetrics::OnDuplicatesDropped(const std::string& topic, int64_t records) {
  duplicates_.Add({{"topic", topic}}).Increment(static_cast<double>(records));
}

void LogMetrics::OnRecordsRemoved(const std::string& topic, bool compaction, int64_t records,
                                  int64_t bytes) {
  records_removed_.Add({{"topic", topic}, {"reason", compaction ? "compaction" : "retention"}})
      .Increment(static_cast<double>(records));
}

void LogMetrics::OnTopicDeleted(const std::string& topic, int32_t partitions) {
  for (auto* family :
       {&records_produced_, &bytes_produced_, &records_fetched_, &bytes_fetched_, &duplicates_}) {
    family->Remove(&family->Add({{"topic", topic}}));
  }
  for (const char* reason : {"compaction", "retention"}) {
    records_removed_.Remove(&records_removed_.Add({{"topic", topic}, {"reason", reason}}));
  }
  for (int32_t p = 0; p < partitions; ++p) {
    high_watermark_.Remove(
        &high_watermark_.Add({{"topic", topic}, {"partition", std::to_string(p)}}));
  }
}

}  // namespace conduit::log_broker::api
