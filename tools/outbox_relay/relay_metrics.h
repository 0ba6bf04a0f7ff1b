#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "tools/outbox_relay/outbox_store.h"

namespace conduit::outbox {

// Prometheus families of the relay, labelled {table}, fed by the loop as its RelayObserver:
//   conduit_outbox_relay_active                       1 while holding the lock, 0 as a standby
//   conduit_outbox_relay_published_rows_total         rows acknowledged and marked (its rate()
//                                                     is the publish rate)
//   conduit_outbox_relay_errors_total                 database and publish errors
//   conduit_outbox_relay_oldest_unpublished_age_seconds  now - occurred_at of the lowest
//                                                     unpublished sequence; 0 when caught up
// Thread-safe (prometheus-cpp metrics are).
class RelayMetrics final : public RelayObserver {
 public:
  RelayMetrics(prometheus::Registry& registry, const std::string& table);

  void OnActive(bool active) override { active_.Set(active ? 1 : 0); }
  void OnPublished(int64_t rows) override { published_.Increment(static_cast<double>(rows)); }
  void OnError(absl::string_view what) override;
  void OnBacklogAge(absl::Duration age) override { age_.Set(absl::ToDoubleSeconds(age)); }

 private:
  prometheus::Gauge& active_;
  prometheus::Counter& published_;
  prometheus::Counter& errors_;
  prometheus::Gauge& age_;
};

}  // namespace conduit::outbox
