#include "services/log_broker/api/log_service.h"

#include "absl/time/clock.h"
#include "common/grpc/reply.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "services/log_broker/api/convert.h"
#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker::api {
namespace {

using grpc_util::ToGrpcStatus;

// Runs `work` on the storage executor and finishes `reactor` with its status.
template <typename Work>
grpc::ServerUnaryReactor* Blocking(grpc::CallbackServerContext* ctx, Broker* broker, Work work) {
  auto* reactor = ctx->DefaultReactor();
  absl::Status queued =
      broker->RunBlocking([ctx, reactor, work]() mutable { reactor->Finish(Answer(ctx, work())); });
  if (!queued.ok()) reactor->Finish(ToGrpcStatus(queued));
  return reactor;
}

// FinishNow with the log service's status mapping (a not-leader answer names the leader).
grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  return grpc_util::FinishNow(ctx, Answer(ctx, status));
}

}  // namespace

grpc::ServerUnaryReactor* LogService::CreateTopic(grpc::CallbackServerContext* ctx,
                                                  const pb::CreateTopicRequest* request,
                                                  pb::CreateTopicResponse* response) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kCreate); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto patch = FromProto(request->config());
  if (!patch.ok()) return Done(ctx, patch.status());
  return Blocking(ctx, broker_, [this, request, response, config = *patch]() -> absl::Status {
    auto meta = broker_->CreateTopic(request->name(), request->partitions(), config,
                                     request->has_replication_factor()
                                         ? std::optional<int32_t>(request->replication_factor())
                                         : std::nullopt);
    if (!meta.ok()) return meta.status();
    ToProto(meta->meta, response->mutable_topic());
    response->mutable_topic()->set_replication_factor(meta->replication_factor);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* LogService::UpdateTopicConfig(grpc::CallbackServerContext* ctx,
                                                        const pb::UpdateTopicConfigRequest* request,
                                                        pb::UpdateTopicConfigResponse* response) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kAlter); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto patch = FromProto(request->config());
  if (!patch.ok()) return Done(ctx, patch.status());
  return Blocking(ctx, broker_, [this, request, response, patch = *patch]() -> absl::Status {
    auto meta = broker_->UpdateTopicConfig(request->name(), patch);
    if (!meta.ok()) return meta.status();
    ToProto(*meta, response->mutable_topic());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* LogService::InitProducer(grpc::CallbackServerContext* ctx,
                                                   const pb::InitProducerRequest* request,
                                                   pb::InitProducerResponse* response) {
  // The request names no topic: a producer id is a cluster-wide grant (Kafka's IdempotentWrite
  // on the cluster); each Produce with it still needs Write on its topic.
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kWrite); !s.ok()) return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  return Blocking(ctx, broker_, [this, request, response]() -> absl::Status {
    auto producer = broker_->InitProducer(request->producer_name());
    if (!producer.ok()) return producer.status();
    response->set_producer_id(producer->id.value());
    response->set_producer_epoch(producer->epoch);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* LogService::ReassignPartition(grpc::CallbackServerContext* ctx,
                                                        const pb::ReassignPartitionRequest* request,
                                                        pb::ReassignPartitionResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok()) return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  return Blocking(ctx, broker_, [this, request]() -> absl::Status {
    return broker_->ReassignPartition(request->topic(), request->partition(),
                                      {request->replicas().begin(), request->replicas().end()},
                                      request->throttle_bytes_per_second());
  });
}

grpc::ServerUnaryReactor* LogService::GetMetadata(grpc::CallbackServerContext* ctx,
                                                  const pb::GetMetadataRequest* request,
                                                  pb::GetMetadataResponse* response) {
  // As Kafka: any caller may ask (the brokers are shown), topics only where it may Describe.
  auto principal = guard_.PrincipalOf(*ctx);
  if (!principal.ok()) return Done(ctx, principal.status());
  std::string address;
  {
    absl::MutexLock lock(&address_mu_);
    address = address_;
  }
  response->set_answered_by(broker_->broker_id());
  response->set_cluster(broker_->cluster_name());
  absl::Status s = ToProto(broker_->Metadata(address), request->topics(), response);
  if (s.ok() && guard_.authorizing()) {
    auto* topics = response->mutable_topics();
    for (int i = topics->size() - 1; i >= 0; --i) {
      if (!guard_
               .Check(*principal, security::ResourceType::kTopic, topics->Get(i).name(),
                      security::Operation::kDescribe)
               .ok()) {
        topics->DeleteSubrange(i, 1);
      }
    }
  }
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* LogService::DeleteTopic(grpc::CallbackServerContext* ctx,
                                                  const pb::DeleteTopicRequest* request,
                                                  pb::DeleteTopicResponse* response) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kDelete); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  return Blocking(ctx, broker_, [this, request] { return broker_->DeleteTopic(request->name()); });
}

grpc::ServerUnaryReactor* LogService::ListTopics(grpc::CallbackServerContext* ctx,
                                                 const pb::ListTopicsRequest* request,
                                                 pb::ListTopicsResponse* response) {
  // Who calls, once; then Describe per topic (a topic the caller may not see is left out).
  auto principal = guard_.PrincipalOf(*ctx);
  if (!principal.ok()) return Done(ctx, principal.status());
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  for (const TopicSummary& t : broker_->ListTopics()) {
    if (!guard_
             .Check(*principal, security::ResourceType::kTopic, t.meta.name,
                    security::Operation::kDescribe)
             .ok()) {
      continue;
    }
    pb::TopicInfo* info = response->add_topics();
    ToProto(t.meta, info);
    info->set_replication_factor(t.replication_factor);
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* LogService::DescribeTopic(grpc::CallbackServerContext* ctx,
                                                    const pb::DescribeTopicRequest* request,
                                                    pb::DescribeTopicResponse* response) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kDescribe); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto description = broker_->DescribeTopic(request->name());
  if (description.ok()) ToProto(*description, response);
  response->set_answered_by(broker_->broker_id());
  return Done(ctx, description.status());
}

grpc::ServerUnaryReactor* LogService::Produce(grpc::CallbackServerContext* ctx,
                                              const pb::ProduceRequest* request,
                                              pb::ProduceResponse* response) {
  if (auto s = Allow(ctx, request->topic(), security::Operation::kWrite); !s.ok())
    return Done(ctx, s);
  if (auto s = CheckRecordTimes(*request); !s.ok()) return Done(ctx, s);
  auto acks = FromProto(request->acks());
  if (!acks.ok()) return Done(ctx, acks.status());
  if (auto s = guard_.ChargeBytes(*ctx, security::QuotaKind::kProduceBytes, RecordBytes(*request));
      !s.ok()) {
    return Done(ctx, s);
  }
  auto* reactor = ctx->DefaultReactor();
  const absl::Time started = absl::Now();
  // The records are not read again: their payloads move out.
  std::vector<ProduceRecordArgs> records;
  records.reserve(request->records_size());
  for (auto& r : *grpc_util::MovableRequest(request).mutable_records()) {
    records.push_back(FromProto(std::move(r)));
  }

  absl::Status status = broker_->Produce(
      request->topic(), std::move(records), ProducerFromProto(*request),
      [this, reactor, response, started](absl::StatusOr<ProduceResult> result) {
        if (result.ok()) {
          ToProto(*result, response->mutable_positions(), response->mutable_append_time());
        }
        metrics_->ObserveProduceLatency(absl::Now() - started);
        metrics_->CountProduce(result.status().code());
        reactor->Finish(ToGrpcStatus(result.status()));
      },
      *acks);
  if (!status.ok()) {
    metrics_->CountProduce(status.code());
    reactor->Finish(Answer(ctx, status));
  }
  return reactor;
}

grpc::ServerUnaryReactor* LogService::Fetch(grpc::CallbackServerContext* ctx,
                                            const pb::FetchRequest* request,
                                            pb::FetchResponse* response) {
  if (auto s = Allow(ctx, request->topic(), security::Operation::kRead); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  const bool payloads = MayViewPayload(ctx, request->topic());
  // Fetch bytes are known after the fetch: a caller in debt is refused, the answer is debited.
  std::string principal;
  if (guard_.has_quotas()) {
    if (auto s = guard_.ChargeBytes(*ctx, security::QuotaKind::kFetchBytes, 1); !s.ok()) {
      return Done(ctx, s);
    }
    principal = guard_.PrincipalOf(*ctx).value_or("");
  }
  auto* reactor = ctx->DefaultReactor();
  const absl::Time started = absl::Now();
  absl::Status status = broker_->Fetch(
      FromProto(*request), [this, reactor, response, started, payloads,
                            principal = std::move(principal)](absl::StatusOr<FetchResult> result) {
        if (result.ok()) {
          response->mutable_records()->Reserve(static_cast<int>(result->records.size()));
          for (const StoredRecord& r : result->records) {
            pb::Record* record = response->add_records();
            ToProto(r, record);
            if (!payloads) record->clear_value();
          }
          response->set_high_watermark(result->high_watermark);
          response->set_log_start_offset(result->log_start_offset);
          response->set_next_offset(result->next_offset);
          if (!principal.empty()) {
            guard_.Debit(principal, security::QuotaKind::kFetchBytes,
                         static_cast<double>(response->ByteSizeLong()));
          }
        }
        metrics_->ObserveFetchLatency(absl::Now() - started);
        reactor->Finish(ToGrpcStatus(result.status()));
      });
  if (!status.ok()) reactor->Finish(Answer(ctx, status));
  return reactor;
}

grpc::ServerUnaryReactor* LogService::ListOffsets(grpc::CallbackServerContext* ctx,
                                                  const pb::ListOffsetsRequest* request,
                                                  pb::ListOffsetsResponse* response) {
  if (auto s = Allow(ctx, request->topic(), security::Operation::kDescribe); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  OffsetQuery query;
  switch (request->spec()) {
    case pb::OFFSET_SPEC_EARLIEST:
      query = OffsetQuery::kEarliest;
      break;
    case pb::OFFSET_SPEC_LATEST:
      query = OffsetQuery::kLatest;
      break;
    case pb::OFFSET_SPEC_TIMESTAMP:
      query = OffsetQuery::kTimestamp;
      break;
    default:
      return Done(ctx, absl::InvalidArgumentError(
                           "spec must be OFFSET_SPEC_EARLIEST, OFFSET_SPEC_LATEST or "
                           "OFFSET_SPEC_TIMESTAMP"));
  }
  if (query == OffsetQuery::kTimestamp && !request->has_timestamp()) {
    return Done(ctx, absl::InvalidArgumentError("OFFSET_SPEC_TIMESTAMP needs a timestamp"));
  }
  return Blocking(ctx, broker_, [this, request, response, query]() -> absl::Status {
    std::vector<int32_t> partitions(request->partitions().begin(), request->partitions().end());
    auto offsets = broker_->ListOffsets(request->topic(), partitions, query,
                                        FromTimestamp(request->timestamp()));
    if (!offsets.ok()) return offsets.status();
    for (const RecordPosition& p : *offsets) {
      auto* out = response->add_offsets();
      out->set_partition(p.partition);
      out->set_offset(p.offset);
    }
    return absl::OkStatus();
  });
}

}  // namespace conduit::log_broker::api
