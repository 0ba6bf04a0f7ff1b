#include "tools/outbox_relay/producer_publisher.h"

#include <grpcpp/grpcpp.h>

#include <future>

#include "absl/strings/str_cat.h"
#include "common/grpc/dial.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::outbox {

namespace logpb = ::conduit::log::v1;

client::ProducerRecord ToRecord(const OutboxRow& row) {
  client::ProducerRecord record;
  record.key = row.aggregate_id;
  record.value = row.payload;
  record.event_id = row.event_id;
  record.event_time = row.occurred_at;
  record.headers.reserve(row.headers.size() + 2);
  record.headers.emplace_back("event-type", row.event_type);
  record.headers.emplace_back("aggregate-version", absl::StrCat(row.aggregate_version));
  for (const auto& h : row.headers) record.headers.push_back(h);
  return record;
}

absl::StatusOr<absl::Duration> EnsureTopic(const std::string& broker, const std::string& topic,
                                           int partitions, absl::Duration dedup_window) {
  auto stub = logpb::LogService::NewStub(grpc_util::Dial(broker));
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    logpb::DescribeTopicRequest request;
    request.set_name(topic);
    logpb::DescribeTopicResponse response;
    const grpc::Status s = stub->DescribeTopic(&ctx, request, &response);
    if (s.ok()) {
      const absl::Duration window =
          grpc_util::FromDuration(response.topic().config().dedup_window());
      if (window <= absl::ZeroDuration()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "topic '", topic,
            "' has no dedup window: a row published again after a crash would be appended twice"));
      }
      return window;
    }
    if (s.error_code() != grpc::StatusCode::NOT_FOUND) return grpc_util::FromGrpcStatus(s);
    if (partitions <= 0) {
      return absl::NotFoundError(absl::StrCat("topic '", topic, "' does not exist"));
    }
    grpc::ClientContext create_ctx;
    create_ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    logpb::CreateTopicRequest create;
    create.set_name(topic);
    create.set_partitions(partitions);
    grpc_util::SetDuration(dedup_window, create.mutable_config()->mutable_dedup_window());
    logpb::CreateTopicResponse created;
    const grpc::Status c = stub->CreateTopic(&create_ctx, create, &created);
    // ALREADY_EXISTS: another relay created it first; describe it again.
    if (!c.ok() && c.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
      return grpc_util::FromGrpcStatus(c);
    }
  }
  return absl::UnavailableError(absl::StrCat("topic '", topic, "' cannot be described"));
}

std::vector<absl::Status> ProducerPublisher::Publish(const std::vector<OutboxRow>& rows) {
  if (producer_ == nullptr) {
    absl::StatusOr<std::unique_ptr<client::Producer>> created = client::Producer::Create(options_);
    if (!created.ok()) return std::vector<absl::Status>(rows.size(), created.status());
    producer_ = std::move(*created);
  }
  std::vector<std::future<absl::StatusOr<client::RecordPosition>>> answers;
  answers.reserve(rows.size());
  for (const OutboxRow& row : rows) answers.push_back(producer_->Send(ToRecord(row)));
  // Flush sends the last, lingering batch at once; the futures carry each row's own answer.
  const absl::Status flushed = producer_->Flush();
  std::vector<absl::Status> results;
  results.reserve(rows.size());
  for (auto& answer : answers) results.push_back(answer.get().status());
  if (!flushed.ok()) producer_.reset();
  for (const absl::Status& s : results) {
    if (!s.ok()) producer_.reset();
  }
  return results;
}

}  // namespace conduit::outbox
