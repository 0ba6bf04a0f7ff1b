#include "services/coordinator/broker/grpc_topic_source.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "services/coordinator/domain/await.h"

namespace conduit::coordinator {

namespace lpb = ::conduit::log::v1;

GrpcTopicSource::GrpcTopicSource(std::string address, absl::Duration deadline)
    : deadline_(deadline), address_(std::move(address)) {}

void GrpcTopicSource::SetAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  address_ = address;
  stub_.reset();
}

absl::StatusOr<std::shared_ptr<lpb::LogService::Stub>> GrpcTopicSource::Stub() {
  absl::MutexLock lock(&mu_);
  if (address_.empty()) return absl::UnavailableError("no broker address configured");
  if (!stub_) {
    stub_ = lpb::LogService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  return stub_;
}

void GrpcTopicSource::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
}

namespace {
absl::Status FromBroker(const grpc::Status& status, const char* what) {
  absl::Status s = grpc_util::FromGrpcStatus(status);
  if (s.ok() || absl::IsNotFound(s) || absl::IsInvalidArgument(s) || absl::IsOutOfRange(s)) {
    return s;
  }
  return absl::Status(s.code(), absl::StrCat("broker ", what, ": ", s.message()));
}
}  // namespace

namespace {
std::vector<PartitionMarks> MarksOf(const lpb::DescribeTopicResponse& resp) {
  std::vector<PartitionMarks> out;
  for (const lpb::PartitionInfo& p : resp.partitions()) {
    PartitionMarks m;
    m.partition = p.partition();
    m.log_start = p.log_start_offset();
    m.high_watermark = p.high_watermark();
    if (p.has_oldest_append_time() && p.high_watermark() > p.log_start_offset()) {
      m.oldest_append_time = grpc_util::FromTimestamp(p.oldest_append_time());
    }
    out.push_back(m);
  }
  return out;
}
}  // namespace

absl::StatusOr<std::vector<PartitionMarks>> GrpcTopicSource::Describe(const std::string& topic) {
  return Await<absl::StatusOr<std::vector<PartitionMarks>>>(
      [&](auto done) { DescribeAsync(topic, std::move(done)); });
}

void GrpcTopicSource::DescribeAsync(const std::string& topic, MarksCallback done) {
  auto stub = Stub();
  if (!stub.ok()) return done(stub.status());
  struct Call {
    grpc::ClientContext ctx;
    lpb::DescribeTopicRequest req;
    lpb::DescribeTopicResponse resp;
  };
  auto call = std::make_shared<Call>();
  SetDeadline(&call->ctx);
  call->req.set_name(topic);
  (*stub)->async()->DescribeTopic(
      &call->ctx, &call->req, &call->resp,
      [call, stub = *stub, done = std::move(done)](grpc::Status s) {
        if (!s.ok()) return done(FromBroker(s, "DescribeTopic"));
        done(MarksOf(call->resp));
      });
}

absl::StatusOr<int64_t> GrpcTopicSource::OffsetForTime(const std::string& topic, int32_t partition,
                                                       absl::Time at) {
  auto stub = Stub();
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  lpb::ListOffsetsRequest req;
  req.set_topic(topic);
  req.add_partitions(partition);
  req.set_spec(lpb::OFFSET_SPEC_TIMESTAMP);
  grpc_util::SetTimestamp(at, req.mutable_timestamp());
  lpb::ListOffsetsResponse resp;
  if (grpc::Status s = (*stub)->ListOffsets(&ctx, req, &resp); !s.ok()) {
    return FromBroker(s, "ListOffsets");
  }
  if (resp.offsets_size() != 1) {
    return absl::InternalError(absl::StrCat("broker ListOffsets returned ", resp.offsets_size(),
                                            " offsets for one partition"));
  }
  return resp.offsets(0).offset();
}

absl::StatusOr<std::optional<absl::Time>> GrpcTopicSource::AppendTimeAt(const std::string& topic,
                                                                         int32_t partition,
                                                                         int64_t offset) {
  auto stub = Stub();
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  lpb::FetchRequest req;
  req.set_topic(topic);
  req.set_partition(partition);
  req.set_offset(offset);
  req.set_max_records(1);
  lpb::FetchResponse resp;
  if (grpc::Status s = (*stub)->Fetch(&ctx, req, &resp); !s.ok()) return FromBroker(s, "Fetch");
  if (resp.records_size() == 0) return std::optional<absl::Time>();
  return std::optional<absl::Time>(grpc_util::FromTimestamp(resp.records(0).append_time()));
}

}  // namespace conduit::coordinator
