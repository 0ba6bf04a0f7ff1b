#include "common/metrics/metrics.h"

#include "absl/strings/str_cat.h"

namespace conduit::metrics {

absl::Status MetricsHub::Serve(const std::string& listen) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen, "': ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  return absl::OkStatus();
}

int MetricsHub::port() const {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 50e-6; v < 30; v *= 2) b.push_back(v);
  return b;
}

prometheus::Histogram::BucketBoundaries CountBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 1; v <= 65536; v *= 2) b.push_back(v);
  return b;
}

}  // namespace conduit::metrics
