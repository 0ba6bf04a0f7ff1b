// conduit-outbox-relay: publishes a PostgreSQL outbox table's rows to a Conduit topic, in
// sequence order, exactly once by event id (tools/outbox_relay/README.md).
#include <cstdio>
#include <fstream>
#include <functional>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/grpc/server_runner.h"
#include "common/logging/logging.h"
#include "common/metrics/metrics.h"
#include "common/time/clock.h"
#include "tools/outbox_relay/outbox_relay.h"
#include "tools/outbox_relay/pg_outbox_store.h"
#include "tools/outbox_relay/producer_publisher.h"
#include "tools/outbox_relay/relay_metrics.h"

ABSL_FLAG(std::string, postgres, "", "libpq conninfo or URI of the database holding the outbox");
ABSL_FLAG(std::string, outbox_table, "conduit_outbox",
          "the outbox table (optionally schema.table)");
ABSL_FLAG(std::string, broker, "127.0.0.1:7070", "bootstrap broker host:port");
ABSL_FLAG(std::string, topic, "", "topic the rows are published to");
ABSL_FLAG(int32_t, batch, 500, "rows read, published and marked per round");
ABSL_FLAG(absl::Duration, poll_interval, absl::Seconds(1),
          "longest wait for a NOTIFY before the table is read again");
ABSL_FLAG(absl::Duration, standby_retry, absl::Seconds(1),
          "how often a standby tries to take the advisory lock");
ABSL_FLAG(int64_t, lock_key, 0,
          "advisory lock key; 0: derived from the table name (hashtextextended)");
ABSL_FLAG(int32_t, create_topic_partitions, 4,
          "create an absent topic with this many partitions and --dedup-window; 0: require it");
ABSL_FLAG(absl::Duration, dedup_window, absl::Hours(24), "dedup window of a topic created here");
ABSL_FLAG(std::string, producer_name, "",
          "stable producer name (fences an older relay's producer); default outbox:<table>");
ABSL_FLAG(int32_t, metrics_port, 9465, "Prometheus /metrics port (0: any free port; -1: off)");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1", "address /metrics is served on");
ABSL_FLAG(std::string, metrics_port_file, "", "if set, write the metrics port here once serving");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error");

namespace conduit::outbox {
namespace {

int Main(const std::function<int()>& wait_for_signal) {
  const std::string table = absl::GetFlag(FLAGS_outbox_table);
  const std::string topic = absl::GetFlag(FLAGS_topic);
  const std::string broker = absl::GetFlag(FLAGS_broker);
  if (absl::GetFlag(FLAGS_postgres).empty() || topic.empty() || absl::GetFlag(FLAGS_batch) < 1) {
    spdlog::critical("conduit-outbox-relay: --postgres and --topic are required, --batch >= 1");
    return 2;
  }
  metrics::MetricsHub metrics;
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port >= 0) {
    if (auto s = metrics.Serve(absl::StrCat(absl::GetFlag(FLAGS_metrics_host), ":", port));
        !s.ok()) {
      spdlog::critical("conduit-outbox-relay: {}", s.ToString());
      return 1;
    }
    if (const std::string file = absl::GetFlag(FLAGS_metrics_port_file); !file.empty()) {
      std::ofstream(file + ".tmp") << metrics.port() << "\n";
      std::rename((file + ".tmp").c_str(), file.c_str());
    }
  }
  absl::StatusOr<absl::Duration> window =
      EnsureTopic(broker, topic, absl::GetFlag(FLAGS_create_topic_partitions),
                  absl::GetFlag(FLAGS_dedup_window));
  if (!window.ok()) {
    spdlog::critical("conduit-outbox-relay: {}", window.status().ToString());
    return 1;
  }

  RelayMetrics observer(*metrics.registry(), table);
  PgOutboxStore store({.conninfo = absl::GetFlag(FLAGS_postgres),
                       .table = table,
                       .lock_key = absl::GetFlag(FLAGS_lock_key)});
  client::ProducerOptions producer;
  producer.address = broker;
  producer.topic = topic;
  producer.max_batch_records = absl::GetFlag(FLAGS_batch);
  producer.producer_name = absl::GetFlag(FLAGS_producer_name);
  if (producer.producer_name.empty()) producer.producer_name = absl::StrCat("outbox:", table);
  ProducerPublisher publisher(producer);
  OutboxRelay relay(&store, &publisher, &observer, time::SystemClock::Get(),
                    {.batch = absl::GetFlag(FLAGS_batch),
                     .poll_interval = absl::GetFlag(FLAGS_poll_interval),
                     .standby_retry = absl::GetFlag(FLAGS_standby_retry)});
  spdlog::info("conduit-outbox-relay: table {} -> topic {} on {} (dedup window {}){}", table, topic,
               broker, absl::FormatDuration(*window),
               metrics.port() ? absl::StrCat(", metrics on port ", metrics.port()) : "");
  // Run returns only after Stop, so the signal thread is done when it is joined.
  std::thread on_signal([&] {
    const int sig = wait_for_signal();
    spdlog::info("conduit-outbox-relay: signal {}, finishing the current batch", sig);
    relay.Stop();
  });
  relay.Run();
  on_signal.join();
  spdlog::info("conduit-outbox-relay: stopped");
  return 0;
}

}  // namespace
}  // namespace conduit::outbox

int main(int argc, char** argv) {
  auto wait_for_signal = conduit::grpc_util::InstallShutdownSignals();  // before any thread
  conduit::flags::Parse(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the servers do
  conduit::logging::Init(absl::GetFlag(FLAGS_log_level));
  return conduit::outbox::Main(wait_for_signal);
}
