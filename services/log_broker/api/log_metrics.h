#pragma once

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/replica_state.h"

namespace conduit::log_broker::api {

// Prometheus families of the log broker, fed by the broker (as its BrokerObserver) and by the
// gRPC service (request latencies). Thread-safe.
class LogMetrics final : public BrokerObserver {
 public:
  explicit LogMetrics(prometheus::Registry& registry);

  void OnBatchWritten(int requests, int records, bool synced, absl::Duration latency) override;
  void OnWalSynced(absl::Duration latency) override;
  void OnProduced(const std::string& topic, int64_t records, int64_t bytes) override;
  void OnFetched(const std::string& topic, int64_t records, int64_t bytes) override;
  void OnHighWatermark(const std::string& topic, int32_t partition, int64_t hw) override;
  void OnTopicDeleted(const std::string& topic, int32_t partitions) override;
  // Replication: counted and logged (these are rare and an operator wants each one).
  void OnTruncated(const std::string& topic, int32_t partition, int64_t offset,
                   const std::string& reason) override;
  void OnInSyncChange(const std::string& topic, int32_t partition, const std::vector<int32_t>& from,
                      const std::vector<int32_t>& to, const absl::Status& written) override;
  void OnDuplicatesDropped(const std::string& topic, int64_t records) override;
  void OnProduceParked() override { produce_parked_.Increment(); }
  void OnRecordsRemoved(const std::string& topic, bool compaction, int64_t records,
                        int64_t bytes) override;

  // Cluster mode, the partitions this broker leads now (ReplicaManager::ReplicationSnapshot):
  // conduit_log_follower_lag_records and _seconds{topic,partition,follower} per follower; the
  // series of a follower no longer led here go.
  void OnReplication(const std::vector<PartitionReplication>& led);

  void ObserveProduceLatency(absl::Duration d) { produce_latency_.Observe(absl::ToDoubleSeconds(d)); }
  void ObserveFetchLatency(absl::Duration d) { fetch_latency_.Observe(absl::ToDoubleSeconds(d)); }
  // conduit_log_produce_requests_total{code}: every Produce call by its final status.
  void CountProduce(absl::StatusCode code) {
    const int i = static_cast<int>(code);
    if (i >= 0 && i < kCodes) produce_requests_[i]->Increment();
  }

 private:
  // prometheus-cpp's Family::Add allocates on every call: the hot path looks metrics up here.
  struct TopicMetrics {
    prometheus::Counter* records_produced;
    prometheus::Counter* bytes_produced;
    prometheus::Counter* records_fetched;
    prometheus::Counter* bytes_fetched;
    prometheus::Counter* duplicates;
  };
  TopicMetrics& ForTopic(const std::string& topic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static constexpr int kCodes = 17;  // the canonical codes, OK .. UNAUTHENTICATED
  std::array<prometheus::Counter*, kCodes> produce_requests_{};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, TopicMetrics> topics_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::string, int32_t>, prometheus::Gauge*> high_watermarks_
      ABSL_GUARDED_BY(mu_);
  struct FollowerGauges {
    prometheus::Gauge* records;
    prometheus::Gauge* seconds;
  };
  absl::Mutex lag_mu_;
  // By (topic, partition, follower).
  absl::flat_hash_map<std::tuple<std::string, int32_t, int32_t>, FollowerGauges> follower_lag_
      ABSL_GUARDED_BY(lag_mu_);

  prometheus::Family<prometheus::Counter>& records_produced_;
  prometheus::Family<prometheus::Counter>& bytes_produced_;
  prometheus::Family<prometheus::Counter>& records_fetched_;
  prometheus::Family<prometheus::Counter>& bytes_fetched_;
  prometheus::Family<prometheus::Gauge>& high_watermark_;
  prometheus::Family<prometheus::Counter>& duplicates_;
  prometheus::Family<prometheus::Counter>& records_removed_;
  prometheus::Family<prometheus::Counter>& truncations_;
  prometheus::Family<prometheus::Counter>& isr_changes_;
  prometheus::Family<prometheus::Gauge>& follower_lag_records_;
  prometheus::Family<prometheus::Gauge>& follower_lag_seconds_;
  prometheus::Counter& produce_parked_;
  prometheus::Histogram& produce_latency_;
  prometheus::Histogram& fetch_latency_;
  prometheus::Histogram& batch_requests_;
  prometheus::Histogram& batch_records_;
  prometheus::Histogram& wal_sync_latency_;
};

}  // namespace conduit::log_broker::api
