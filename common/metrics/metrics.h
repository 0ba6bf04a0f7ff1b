#pragma once

#include <prometheus/collectable.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace conduit::metrics {

class HttpExposer;
class TlsExposer;
struct MetricsTlsFiles;

// The process's one Prometheus registry, and optionally the HTTP(S) exposer serving it at
// /metrics. Services register their *Metrics families on registry(); collectors computed at
// scrape time (the process, the data directory) are added with AddCollectable. From the start
// it holds conduit_build_info{version, commit, compiler, build_type} (always 1) and the process
// metrics (ProcessCollector). Thread-safe (prometheus-cpp families are).
class MetricsHub {
 public:
  MetricsHub();
  ~MetricsHub();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // Scraped after the registry, in the order added.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  // Serves /metrics on host:port (port 0 picks one): over HTTPS when `tls` names files (see
  // TlsExposer), else plain HTTP. UNAVAILABLE when it cannot bind; TlsExposer::Start's errors
  // for the files.
  absl::Status Serve(const std::string& listen);
  absl::Status Serve(const std::string& listen, const MetricsTlsFiles& tls);
  // The bound port, or 0 when not serving.
  int port() const;
  // "https" or "http".
  const char* scheme() const;

 private:
  class Exposition;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Exposition> exposition_;  // the registry and the added collectables
  std::unique_ptr<HttpExposer> exposer_;
  std::unique_ptr<TlsExposer> tls_exposer_;
};

// Latency buckets in seconds, 50 µs .. ~26 s, exponential ×2: fine enough for fsync-bound
// acks and for long-polls.
prometheus::Histogram::BucketBoundaries LatencyBuckets();

// Size buckets 1 .. 65536, ×2 (batch sizes, record counts).
prometheus::Histogram::BucketBoundaries CountBuckets();

}  // namespace conduit::metrics
