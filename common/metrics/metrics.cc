#include "common/metrics/metrics.h"

#include <prometheus/gauge.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/build_info.h"
#include "common/metrics/http_exposer.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/tls_exposer.h"

namespace conduit::metrics {

// What a scrape collects: the registry, then every added collectable.
class MetricsHub::Exposition final : public prometheus::Collectable {
 public:
  void Add(std::shared_ptr<prometheus::Collectable> c) {
    absl::MutexLock lock(&mu_);
    parts_.push_back(std::move(c));
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<std::shared_ptr<prometheus::Collectable>> parts;
    {
      absl::MutexLock lock(&mu_);
      parts = parts_;
    }
    std::vector<prometheus::MetricFamily> out;
    for (const auto& part : parts) {
      for (auto& family : part->Collect()) out.push_back(std::move(family));
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> parts_ ABSL_GUARDED_BY(mu_);
};

MetricsHub::MetricsHub()
    : registry_(std::make_shared<prometheus::Registry>()),
      exposition_(std::make_shared<Exposition>()) {
  exposition_->Add(registry_);
  exposition_->Add(std::make_shared<ProcessCollector>());
  prometheus::BuildGauge()
      .Name("conduit_build_info")
      .Help("The build of this binary (always 1): version, source commit, compiler, build type")
      .Register(*registry_)
      .Add({{"version", kBuildVersion},
            {"commit", kBuildCommit},
            {"compiler", kBuildCompiler},
            {"build_type", kBuildType}})
      .Set(1);
}
MetricsHub::~MetricsHub() = default;

void MetricsHub::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  exposition_->Add(std::move(collectable));
}

absl::Status MetricsHub::Serve(const std::string& listen) { return Serve(listen, {}); }

absl::Status MetricsHub::Serve(const std::string& listen, const MetricsTlsFiles& tls) {
  if (tls.enabled()) {
    auto exposer = TlsExposer::Start(listen, tls, exposition_);
    if (!exposer.ok()) return exposer.status();
    tls_exposer_ = std::move(*exposer);
    return absl::OkStatus();
  }
  auto exposer = HttpExposer::Start(listen, exposition_);
  if (!exposer.ok()) return exposer.status();
  exposer_ = std::move(*exposer);
  return absl::OkStatus();
}

int MetricsHub::port() const {
  if (tls_exposer_) return tls_exposer_->port();
  return exposer_ ? exposer_->port() : 0;
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
