#include "tools/outbox_relay/relay_metrics.h"

#include <spdlog/spdlog.h>

namespace conduit::outbox {

RelayMetrics::RelayMetrics(prometheus::Registry& registry, const std::string& table)
    : active_(prometheus::BuildGauge()
                  .Name("conduit_outbox_relay_active")
                  .Help("1 while this relay holds the outbox's advisory lock, 0 as a standby")
                  .Register(registry)
                  .Add({{"table", table}})),
      published_(prometheus::BuildCounter()
                     .Name("conduit_outbox_relay_published_rows_total")
                     .Help("Outbox rows acknowledged by the broker and marked published")
                     .Register(registry)
                     .Add({{"table", table}})),
      errors_(prometheus::BuildCounter()
                  .Name("conduit_outbox_relay_errors_total")
                  .Help("Database and publish errors (each followed by a backoff and a retry)")
                  .Register(registry)
                  .Add({{"table", table}})),
      age_(prometheus::BuildGauge()
               .Name("conduit_outbox_relay_oldest_unpublished_age_seconds")
               .Help("Age (now - occurred_at) of the unpublished row with the lowest sequence")
               .Register(registry)
               .Add({{"table", table}})) {}

void RelayMetrics::OnError(absl::string_view what) {
  errors_.Increment();
  spdlog::warn("outbox relay: {}", std::string(what));
}

}  // namespace conduit::outbox
