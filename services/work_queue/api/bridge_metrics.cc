#include "services/work_queue/api/bridge_metrics.h"

namespace conduit::work_queue::api {

BridgeMetrics::BridgeMetrics(prometheus::Registry& registry)
    : records_(prometheus::BuildCounter()
                   .Name("conduit_bridge_records_total")
                   .Help("Records a bridge turned into jobs (durable, then committed)")
                   .Register(registry)),
      filtered_(prometheus::BuildCounter()
                    .Name("conduit_bridge_filtered_total")
                    .Help("Records a bridge's filter skipped")
                    .Register(registry)),
      refusals_(prometheus::BuildCounter()
                    .Name("conduit_bridge_refusals_total")
                    .Help("Batches the queue refused (depth, age, disk), retried with backoff")
                    .Register(registry)),
      lag_records_(prometheus::BuildGauge()
                       .Name("conduit_bridge_lag_records")
                       .Help("Records of the topic the bridge's group has not committed")
                       .Register(registry)),
      lag_seconds_(prometheus::BuildGauge()
                       .Name("conduit_bridge_lag_seconds")
                       .Help("Age of the oldest record the bridge's group has not committed")
                       .Register(registry)),
      running_(prometheus::BuildGauge()
                   .Name("conduit_bridge_running")
                   .Help("1 while the bridge reads (not paused or deleted)")
                   .Register(registry)) {}

void BridgeMetrics::OnBridged(const std::string& bridge, int64_t jobs, int64_t filtered) {
  records_.Add({{"bridge", bridge}}).Increment(static_cast<double>(jobs));
  filtered_.Add({{"bridge", bridge}}).Increment(static_cast<double>(filtered));
}

void BridgeMetrics::OnRefused(const std::string& bridge) {
  refusals_.Add({{"bridge", bridge}}).Increment();
}

void BridgeMetrics::OnRunning(const std::string& bridge, bool running) {
  running_.Add({{"bridge", bridge}}).Set(running ? 1 : 0);
}

void BridgeMetrics::OnLag(const std::string& bridge, int64_t records, double seconds) {
  lag_records_.Add({{"bridge", bridge}}).Set(static_cast<double>(records));
  lag_seconds_.Add({{"bridge", bridge}}).Set(seconds);
}

void BridgeMetrics::OnForgotten(const std::string& bridge) {
  for (auto* family : {&records_, &filtered_, &refusals_}) {
    family->Remove(&family->Add({{"bridge", bridge}}));
  }
  for (auto* family : {&lag_records_, &lag_seconds_, &running_}) {
    family->Remove(&family->Add({{"bridge", bridge}}));
  }
}

}  // namespace conduit::work_queue::api
