#pragma once

// Small synchronous helpers over the generated LogService stub, for tests. Every call carries a
// deadline.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::testing {

namespace logpb = ::conduit::log::v1;

class LogClient {
 public:
  explicit LogClient(const std::string& address)
      : stub_(logpb::LogService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  logpb::LogService::Stub* stub() { return stub_.get(); }

  static void SetDeadline(grpc::ClientContext* ctx, absl::Duration d = absl::Seconds(10)) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + d));
  }

  grpc::Status CreateTopic(const std::string& name, int partitions,
                           logpb::Durability durability = logpb::DURABILITY_SYNC) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    logpb::CreateTopicRequest request;
    request.set_name(name);
    request.set_partitions(partitions);
    request.mutable_config()->set_durability(durability);
    logpb::CreateTopicResponse response;
    return stub_->CreateTopic(&ctx, request, &response);
  }

  grpc::Status Produce(const logpb::ProduceRequest& request, logpb::ProduceResponse* response,
                       absl::Duration deadline = absl::Seconds(10)) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, deadline);
    return stub_->Produce(&ctx, request, response);
  }

  grpc::Status Fetch(const std::string& topic, int partition, int64_t offset,
                     logpb::FetchResponse* response, int max_records = 10000,
                     absl::Duration max_wait = absl::ZeroDuration()) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, max_wait + absl::Seconds(10));
    logpb::FetchRequest request;
    request.set_topic(topic);
    request.set_partition(partition);
    request.set_offset(offset);
    request.set_max_records(max_records);
    request.mutable_max_wait()->set_seconds(absl::ToInt64Seconds(max_wait));
    request.mutable_max_wait()->set_nanos(
        static_cast<int32_t>(absl::ToInt64Nanoseconds(max_wait % absl::Seconds(1))));
    return stub_->Fetch(&ctx, request, response);
  }

  // Every record of a partition from `from` up to the high watermark, in order.
  grpc::Status FetchAll(const std::string& topic, int partition, std::vector<logpb::Record>* out,
                        int64_t from = 0) {
    int64_t offset = from;
    while (true) {
      logpb::FetchResponse response;
      grpc::Status status = Fetch(topic, partition, offset, &response);
      if (!status.ok()) return status;
      for (const auto& r : response.records()) out->push_back(r);
      if (response.records().empty() || out->back().offset() + 1 >= response.high_watermark()) {
        return grpc::Status::OK;
      }
      offset = out->back().offset() + 1;
    }
  }

 private:
  std::unique_ptr<logpb::LogService::Stub> stub_;
};

inline logpb::ProduceRecord* AddRecord(logpb::ProduceRequest* request, const std::string& value,
                                       const std::string* key = nullptr, int partition = -1) {
  auto* record = request->add_records();
  record->set_value(value);
  if (key) record->set_key(*key);
  if (partition >= 0) record->set_partition(partition);
  return record;
}

}  // namespace conduit::testing
