#include "common/grpc/rpc_metrics.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>

#include <array>
#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/rpc_type.h"
#include "common/metrics/metrics.h"

namespace conduit::grpc_util {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

constexpr int kCodes = 17;  // grpc::StatusCode OK (0) .. UNAUTHENTICATED (16)

const char* CodeName(int code) {
  static constexpr std::array<const char*, kCodes> kNames = {"OK",
                                                             "CANCELLED",
                                                             "UNKNOWN",
                                                             "INVALID_ARGUMENT",
                                                             "DEADLINE_EXCEEDED",
                                                             "NOT_FOUND",
                                                             "ALREADY_EXISTS",
                                                             "PERMISSION_DENIED",
                                                             "RESOURCE_EXHAUSTED",
                                                             "FAILED_PRECONDITION",
                                                             "ABORTED",
                                                             "OUT_OF_RANGE",
                                                             "UNIMPLEMENTED",
                                                             "INTERNAL",
                                                             "UNAVAILABLE",
                                                             "DATA_LOSS",
                                                             "UNAUTHENTICATED"};
  return code >= 0 && code < kCodes ? kNames[code] : "UNKNOWN";
}

const char* TypeName(ServerRpcInfo::Type type) {
  switch (type) {
    case ServerRpcInfo::Type::UNARY:
      return "unary";
    case ServerRpcInfo::Type::SERVER_STREAMING:
      return "server_stream";
    case ServerRpcInfo::Type::CLIENT_STREAMING:
      return "client_stream";
    case ServerRpcInfo::Type::BIDI_STREAMING:
      return "bidi_stream";
  }
  return "unknown";
}

// One method's series; the per-code ones made on first use. Once made, a per-code pair is read
// without the factory's lock (published by `seconds`, stored last with release).
struct MethodSeries {
  prometheus::Labels labels;
  prometheus::Counter* started = nullptr;
  std::array<prometheus::Counter*, kCodes> handled{};
  std::array<std::atomic<prometheus::Histogram*>, kCodes> seconds{};
};

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RpcMetricsFactory(prometheus::Registry& registry, const time::Clock* clock)
      : clock_(clock),
        started_(prometheus::BuildCounter()
                     .Name("conduit_grpc_server_started_total")
                     .Help("gRPC calls started, by service, method and type")
                     .Register(registry)),
        handled_(prometheus::BuildCounter()
                     .Name("conduit_grpc_server_handled_total")
                     .Help("Unary and server-streaming gRPC calls answered, by status code")
                     .Register(registry)),
        seconds_(prometheus::BuildHistogram()
                     .Name("conduit_grpc_server_handling_seconds")
                     .Help("Seconds from the start of a unary or server-streaming gRPC call to "
                           "its status, by status code")
                     .Register(registry)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override;

  // The call's end: counts it under `code`.
  void Handled(MethodSeries* series, int code, absl::Duration elapsed) {
    if (code < 0 || code >= kCodes) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
    prometheus::Histogram* seconds = series->seconds[code].load(std::memory_order_acquire);
    if (seconds == nullptr) {  // this method's first call with this code
      absl::MutexLock lock(&mu_);
      seconds = series->seconds[code].load(std::memory_order_relaxed);
      if (seconds == nullptr) {
        prometheus::Labels labels = series->labels;
        labels["grpc_code"] = CodeName(code);
        series->handled[code] = &handled_.Add(labels);
        seconds = &seconds_.Add(labels, buckets_);
        series->seconds[code].store(seconds, std::memory_order_release);
      }
    }
    series->handled[code]->Increment();
    seconds->Observe(absl::ToDoubleSeconds(elapsed));
  }

  const time::Clock* clock() const { return clock_; }

 private:
  MethodSeries* Series(const char* method, ServerRpcInfo::Type type) {
    const absl::string_view path = method != nullptr ? method : "";
    if (MethodSeries* s = Find(path)) return s;  // every call of a known method
    // Methods this binary was not built with (a client calling one that does not exist) share
    // one series per type, so made-up names cannot grow the page without bound; after the first,
    // their calls too take the shared lock only.
    const google::protobuf::MethodDescriptor* m = FindMethod(path);
    const std::string key = m != nullptr ? std::string(path) : absl::StrCat("?", TypeName(type));
    if (m == nullptr) {
      if (MethodSeries* s = Find(key)) return s;
    }
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = series_.try_emplace(key);
    MethodSeries& s = it->second;
    if (inserted) {
      s.labels = {{"grpc_service", m != nullptr ? m->service()->full_name() : "unknown"},
                  {"grpc_method", m != nullptr ? m->name() : "unknown"},
                  {"grpc_type", TypeName(type)}};
      s.started = &started_.Add(s.labels);
    }
    return &s;
  }
  MethodSeries* Find(absl::string_view key) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    auto it = series_.find(key);
    return it == series_.end() ? nullptr : &it->second;
  }

  const time::Clock* const clock_;
  const prometheus::Histogram::BucketBoundaries buckets_ = metrics::LatencyBuckets();
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Counter>& handled_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  absl::Mutex mu_;
  // Keyed by the method path; node-based, so a MethodSeries stays where it is.
  absl::node_hash_map<std::string, MethodSeries> series_ ABSL_GUARDED_BY(mu_);
};

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(RpcMetricsFactory* factory, MethodSeries* series)
      : factory_(factory), series_(series), start_(factory->clock()->Monotonic()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      factory_->Handled(series_, static_cast<int>(methods->GetSendStatus().error_code()),
                        factory_->clock()->Monotonic() - start_);
    }
    methods->Proceed();
  }

 private:
  RpcMetricsFactory* const factory_;
  MethodSeries* const series_;
  const absl::Duration start_;
};

grpc::experimental::Interceptor* RpcMetricsFactory::CreateServerInterceptor(ServerRpcInfo* info) {
  MethodSeries* series = Series(info->method(), info->type());
  series->started->Increment();
  if (ReadsAStream(info->type())) return nullptr;
  return new RpcMetricsInterceptor(this, series);
}

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptorFactory(
    prometheus::Registry& registry, const time::Clock* clock) {
  return std::make_unique<RpcMetricsFactory>(registry, clock);
}

}  // namespace conduit::grpc_util
