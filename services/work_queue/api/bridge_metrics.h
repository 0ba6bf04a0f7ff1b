#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "services/work_queue/bridge/bridge_runner.h"

namespace conduit::work_queue::api {

// Prometheus families of the bridges, fed by the runners (label `bridge`):
// conduit_bridge_records_total, conduit_bridge_filtered_total, conduit_bridge_refusals_total,
// conduit_bridge_lag_records, conduit_bridge_lag_seconds, conduit_bridge_running. Thread-safe
// (prometheus-cpp families are).
class BridgeMetrics final : public bridge::BridgeObserver {
 public:
  explicit BridgeMetrics(prometheus::Registry& registry);

  void OnBridged(const std::string& bridge, int64_t jobs, int64_t filtered) override;
  void OnRefused(const std::string& bridge) override;
  void OnRunning(const std::string& bridge, bool running) override;
  void OnLag(const std::string& bridge, int64_t records, double seconds) override;
  void OnForgotten(const std::string& bridge) override;

 private:
  prometheus::Family<prometheus::Counter>& records_;
  prometheus::Family<prometheus::Counter>& filtered_;
  prometheus::Family<prometheus::Counter>& refusals_;
  prometheus::Family<prometheus::Gauge>& lag_records_;
  prometheus::Family<prometheus::Gauge>& lag_seconds_;
  prometheus::Family<prometheus::Gauge>& running_;
};

}  // namespace conduit::work_queue::api
