#include "common/metrics/metrics.h"

#include "absl/strings/str_cat.h"
#include "common/metrics/tls_exposer.h"

namespace conduit::metrics {

MetricsHub::MetricsHub() : registry_(std::make_shared<prometheus::Registry>()) {}
MetricsHub::~MetricsHub() = default;

absl::Status MetricsHub::Serve(const std::string& listen) { return Serve(listen, {}); }

absl::Status MetricsHub::Serve(const std::string& listen, const MetricsTlsFiles& tls) {
  if (tls.enabled()) {
    auto exposer = TlsExposer::Start(listen, tls, registry_);
    if (!exposer.ok()) return exposer.status();
    tls_exposer_ = std::move(*exposer);
    return absl::OkStatus();
  }
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", listen, "': ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  return absl::OkStatus();
}

int MetricsHub::port() const {
  if (tls_exposer_) return tls_exposer_->port();
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

const char* MetricsHub::scheme() const { return tls_exposer_ ? "https" : "http"; }

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
