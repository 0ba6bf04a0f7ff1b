#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/exposer.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace conduit::metrics {

// The process's one Prometheus registry, and optionally the HTTP exposer serving it at
// /metrics. Services register their *Metrics families on registry(). Thread-safe (prometheus-cpp
// families are).
class MetricsHub {
 public:
  MetricsHub() : registry_(std::make_shared<prometheus::Registry>()) {}

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Serves /metrics on host:port (port 0 picks one). UNAVAILABLE when it cannot bind.
  absl::Status Serve(const std::string& listen);
  // The bound port, or 0 when not serving.
  int port() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

// Latency buckets in seconds, 50 µs .. ~26 s, exponential ×2: fine enough for fsync-bound
// acks and for long-polls.
prometheus::Histogram::BucketBoundaries LatencyBuckets();

// Size buckets 1 .. 65536, ×2 (batch sizes, record counts).
prometheus::Histogram::BucketBoundaries CountBuckets();

}  // namespace conduit::metrics
