#include "services/coordinator/broker/grpc_topic_source.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/cluster_router.h"
#include "common/grpc/dial.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "services/coordinator/domain/await.h"

namespace conduit::coordinator {

namespace lpb = ::conduit::log::v1;

// Callback calls on their way; the source's destructor waits for them. A callback's captures
// (its ClientContext, a stub) hold channels, and in a process whose gRPC server has gone (the
// coordinator at shutdown) dropping the last reference to a channel on gRPC's callback thread
// shuts those threads down from one of their own: gRPC 1.51 aborts the process
// (tests/integration/client_shutdown_test.cc). So each callback releases what it holds, then
// answers, and ends its count last; until then the source, and so its channels, live. Shared
// with the callbacks, which touch it after the destructor may have woken.
struct CallsInFlight {
  absl::Mutex mu;
  int count ABSL_GUARDED_BY(mu) = 0;

  void Begin() {
    absl::MutexLock lock(&mu);
    ++count;
  }
  void End() {
    absl::MutexLock lock(&mu);
    --count;
  }
  void AwaitNone() {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* count) { return *count == 0; }, &count));
  }
};

namespace {

// A broker that cannot be reached (another in the list may be).
bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

GrpcTopicSource::GrpcTopicSource(std::string addresses, absl::Duration deadline)
    : deadline_(deadline),
      addresses_(client::BootstrapList(addresses, {})),
      calls_(std::make_shared<CallsInFlight>()) {}

GrpcTopicSource::~GrpcTopicSource() { calls_->AwaitNone(); }

void GrpcTopicSource::SetAddress(const std::string& addresses) {
  absl::MutexLock lock(&mu_);
  addresses_ = client::BootstrapList(addresses, {});
  current_ = 0;
  stub_.reset();
}

absl::StatusOr<GrpcTopicSource::WayIn> GrpcTopicSource::Stub() {
  absl::MutexLock lock(&mu_);
  if (addresses_.empty()) return absl::UnavailableError("no broker address configured");
  if (!stub_) {
    stub_ = lpb::LogService::NewStub(grpc_util::Dial(addresses_[current_]));
  }
  return WayIn{stub_, current_};
}

size_t GrpcTopicSource::BrokerCount() {
  absl::MutexLock lock(&mu_);
  return addresses_.size();
}

void GrpcTopicSource::MoveOn(size_t index) {
  absl::MutexLock lock(&mu_);
  if (index != current_ || addresses_.empty()) return;
  current_ = (current_ + 1) % addresses_.size();
  stub_.reset();
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
PartitionMarks MarksOf(const lpb::PartitionInfo& p) {
  PartitionMarks m;
  m.partition = p.partition();
  m.log_start = p.log_start_offset();
  m.high_watermark = p.high_watermark();
  if (p.has_oldest_append_time() && p.high_watermark() > p.log_start_offset()) {
    m.oldest_append_time = grpc_util::FromTimestamp(p.oldest_append_time());
  }
  return m;
}

std::vector<PartitionMarks> MarksOf(const lpb::DescribeTopicResponse& resp) {
  std::vector<PartitionMarks> out;
  for (const lpb::PartitionInfo& p : resp.partitions()) out.push_back(MarksOf(p));
  return out;
}

bool LedElsewhere(const lpb::DescribeTopicResponse& resp) {
  for (const lpb::PartitionInfo& p : resp.partitions()) {
    if (p.leader() != resp.answered_by()) return true;
  }
  return false;
}
}  // namespace

std::shared_ptr<GrpcTopicSource::LogStub> GrpcTopicSource::LeaderStubs::For(
    const std::string& address) {
  absl::MutexLock lock(&mu);
  auto& stub = stubs[address];
  if (!stub) {
    stub = lpb::LogService::NewStub(grpc_util::Dial(address));
  }
  return stub;
}

absl::StatusOr<std::vector<PartitionMarks>> GrpcTopicSource::Describe(const std::string& topic) {
  return Await<absl::StatusOr<std::vector<PartitionMarks>>>(
      [&](auto done) { DescribeAsync(topic, std::move(done)); });
}

void GrpcTopicSource::DescribeAsync(const std::string& topic, MarksCallback done) {
  DescribeAsync(topic, std::move(done), BrokerCount());
}

void GrpcTopicSource::DescribeAsync(const std::string& topic, MarksCallback done,
                                    size_t attempts_left) {
  auto way_in = Stub();
  if (!way_in.ok()) return done(way_in.status());
  struct Call {
    grpc::ClientContext ctx;
    lpb::DescribeTopicRequest req;
    lpb::DescribeTopicResponse resp;
  };
  auto call = std::make_shared<Call>();
  SetDeadline(&call->ctx);
  call->req.set_name(topic);
  calls_->Begin();
  way_in->stub->async()->DescribeTopic(
      &call->ctx, &call->req, &call->resp,
      [this, topic, call, stub = way_in->stub, index = way_in->index, attempts_left,
       done = std::move(done), calls = calls_](grpc::Status s) mutable {
        std::optional<absl::StatusOr<std::vector<PartitionMarks>>> answer;
        if (Unreachable(s) && attempts_left > 1) {
          MoveOn(index);
          DescribeAsync(topic, std::move(done), attempts_left - 1);  // counted on its own
        } else if (!s.ok()) {
          answer = FromBroker(s, "DescribeTopic");
        } else if (!LedElsewhere(call->resp)) {
          answer = MarksOf(call->resp);
        } else {
          DescribeAtLeaders(topic, stub, call->resp, std::move(done));  // counted on its own
        }
        call.reset();  // the channels go before the answer (CallsInFlight)
        stub.reset();
        if (answer) done(*std::move(answer));
        calls->End();
      });
}

namespace {

// The marks of one topic being put together from several leaders' answers.
struct MarksMerge {
  absl::Mutex mu;
  std::vector<PartitionMarks> marks ABSL_GUARDED_BY(mu);
  int pending ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);
  TopicSource::MarksCallback done;
};

// DescribeTopic at one leader: takes the partitions it leads into `merge`; the last answer in
// finishes the merge.
void DescribeAtLeader(std::shared_ptr<lpb::LogService::Stub> stub, const std::string& topic,
                      absl::Time deadline, std::shared_ptr<MarksMerge> merge,
                      std::shared_ptr<CallsInFlight> calls) {
  struct Call {
    grpc::ClientContext ctx;
    lpb::DescribeTopicRequest req;
    lpb::DescribeTopicResponse resp;
  };
  auto call = std::make_shared<Call>();
  call->ctx.set_deadline(absl::ToChronoTime(deadline));
  call->req.set_name(topic);
  calls->Begin();
  stub->async()->DescribeTopic(
      &call->ctx, &call->req, &call->resp, [call, stub, merge, calls](grpc::Status s) mutable {
        std::optional<absl::StatusOr<std::vector<PartitionMarks>>> out;
        {
          absl::MutexLock lock(&merge->mu);
          if (!s.ok() && merge->error.ok()) merge->error = FromBroker(s, "DescribeTopic");
          for (const lpb::PartitionInfo& p : call->resp.partitions()) {
            const size_t i = static_cast<size_t>(p.partition());
            if (p.leader() == call->resp.answered_by() && i < merge->marks.size()) {
              merge->marks[i] = MarksOf(p);
            }
          }
          if (--merge->pending == 0) {
            out = merge->error.ok() ? absl::StatusOr<std::vector<PartitionMarks>>(merge->marks)
                                    : merge->error;
          }
        }
        call.reset();  // the channels go before the answer (CallsInFlight)
        stub.reset();
        if (out) merge->done(*std::move(out));
        calls->End();
      });
}

}  // namespace

void GrpcTopicSource::DescribeAtLeaders(const std::string& topic, std::shared_ptr<LogStub> via,
                                        const lpb::DescribeTopicResponse& first,
                                        MarksCallback done) {
  std::set<int32_t> leaders;
  for (const lpb::PartitionInfo& p : first.partitions()) {
    if (p.leader() < 0) {
      return done(absl::UnavailableError(
          absl::StrCat("partition ", p.partition(), " of '", topic, "' is offline")));
    }
    if (p.leader() != first.answered_by()) leaders.insert(p.leader());
  }
  auto merge = std::make_shared<MarksMerge>();
  {
    absl::MutexLock lock(&merge->mu);
    merge->marks = MarksOf(first);
    merge->pending = static_cast<int>(leaders.size());
  }
  merge->done = std::move(done);
  struct Call {
    grpc::ClientContext ctx;
    lpb::GetMetadataRequest req;
    lpb::GetMetadataResponse resp;
  };
  auto call = std::make_shared<Call>();
  SetDeadline(&call->ctx);
  call->req.add_topics(topic);
  calls_->Begin();
  via->async()->GetMetadata(
      &call->ctx, &call->req, &call->resp,
      [topic, call, via, merge, leaders, stubs = leaders_, deadline = absl::Now() + deadline_,
       calls = calls_](grpc::Status s) mutable {
        if (s.ok()) {
          std::map<int32_t, std::string> addresses;
          for (const auto& b : call->resp.brokers()) addresses[b.id()] = b.address();
          for (int32_t leader : leaders) {
            DescribeAtLeader(stubs->For(addresses[leader]), topic, deadline, merge, calls);
          }
        }
        call.reset();  // the channels go before the answer (CallsInFlight)
        via.reset();
        stubs.reset();
        if (!s.ok()) merge->done(FromBroker(s, "GetMetadata"));
        calls->End();
      });
}

grpc::Status GrpcTopicSource::CallFollowingLeader(
    const std::function<grpc::Status(LogStub& stub, grpc::ClientContext& ctx)>& call) {
  grpc::Status s;
  for (size_t attempts_left = BrokerCount(); attempts_left > 0; --attempts_left) {
    auto way_in = Stub();
    if (!way_in.ok()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(way_in.status().message()));
    }
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    s = call(*way_in->stub, ctx);
    if (Unreachable(s)) {
      MoveOn(way_in->index);
      continue;
    }
    if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return s;
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto leader = trailers.find("conduit-leader-address");
    if (leader == trailers.end()) return s;
    grpc::ClientContext again;
    SetDeadline(&again);
    return call(*leaders_->For(std::string(leader->second.data(), leader->second.size())), again);
  }
  return s;
}

absl::StatusOr<int64_t> GrpcTopicSource::OffsetForTime(const std::string& topic, int32_t partition,
                                                       absl::Time at) {
  lpb::ListOffsetsRequest req;
  req.set_topic(topic);
  req.add_partitions(partition);
  req.set_spec(lpb::OFFSET_SPEC_TIMESTAMP);
  grpc_util::SetTimestamp(at, req.mutable_timestamp());
  lpb::ListOffsetsResponse resp;
  grpc::Status s = CallFollowingLeader(
      [&](LogStub& stub, grpc::ClientContext& ctx) { return stub.ListOffsets(&ctx, req, &resp); });
  if (!s.ok()) return FromBroker(s, "ListOffsets");
  if (resp.offsets_size() != 1) {
    return absl::InternalError(absl::StrCat("broker ListOffsets returned ", resp.offsets_size(),
                                            " offsets for one partition"));
  }
  return resp.offsets(0).offset();
}

absl::StatusOr<std::optional<absl::Time>> GrpcTopicSource::AppendTimeAt(const std::string& topic,
                                                                        int32_t partition,
                                                                        int64_t offset) {
  lpb::FetchRequest req;
  req.set_topic(topic);
  req.set_partition(partition);
  req.set_offset(offset);
  req.set_max_records(1);
  lpb::FetchResponse resp;
  grpc::Status s = CallFollowingLeader(
      [&](LogStub& stub, grpc::ClientContext& ctx) { return stub.Fetch(&ctx, req, &resp); });
  if (!s.ok()) return FromBroker(s, "Fetch");
  if (resp.records_size() == 0) return std::optional<absl::Time>();
  return std::optional<absl::Time>(grpc_util::FromTimestamp(resp.records(0).append_time()));
}

}  // namespace conduit::coordinator
