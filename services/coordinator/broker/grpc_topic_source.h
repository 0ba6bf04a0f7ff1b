#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/coordinator/domain/topic_source.h"

namespace conduit::coordinator {

struct CallsInFlight;  // grpc_topic_source.cc

// TopicSource over the log broker's gRPC API (conduit.log.v1.LogService). The channel is made
// on first use, so that conduit-standalone can point it at its own address once it is serving.
// Every call has a deadline; failures come back as the broker's status (UNAVAILABLE when it
// cannot be reached). Thread-safe.
//
// In a cluster the configured brokers are the way in: one at a time, the next one when it cannot
// be reached (UNAVAILABLE or a deadline: a call tries each once, and later calls stay with the
// one that answered), so the marks stay fresh while any listed broker lives. Marks of partitions
// the way in does not lead come from their leaders (GetMetadata, then DescribeTopic at each
// leader), and offset and time lookups follow the not-leader answer's conduit-leader-address. An
// offline partition makes Describe UNAVAILABLE.
class GrpcTopicSource final : public TopicSource {
 public:
  // `addresses` is host:port or a comma-separated list of them (a bootstrap list), or empty until
  // SetAddress.
  explicit GrpcTopicSource(std::string addresses, absl::Duration deadline = absl::Seconds(3));
  // Waits for the callback calls on their way.
  ~GrpcTopicSource() override;

  // Replaces the way in (a list, as in the constructor).
  void SetAddress(const std::string& addresses);

  absl::StatusOr<std::vector<PartitionMarks>> Describe(const std::string& topic) override;
  // Over gRPC's callback API: `done` runs on a gRPC thread when the broker answers.
  void DescribeAsync(const std::string& topic, MarksCallback done) override;
  absl::StatusOr<int64_t> OffsetForTime(const std::string& topic, int32_t partition,
                                        absl::Time at) override;
  absl::StatusOr<std::optional<absl::Time>> AppendTimeAt(const std::string& topic,
                                                         int32_t partition,
                                                         int64_t offset) override;

 private:
  using LogStub = conduit::log::v1::LogService::Stub;
  // Stubs of partition leaders by address, made on first use; shared with calls in flight.
  struct LeaderStubs {
    absl::Mutex mu;
    std::map<std::string, std::shared_ptr<LogStub>> stubs ABSL_GUARDED_BY(mu);
    std::shared_ptr<LogStub> For(const std::string& address);
  };

  // The way in: a stub of the current broker, and that broker's place in the list.
  struct WayIn {
    std::shared_ptr<LogStub> stub;
    size_t index = 0;
  };
  absl::StatusOr<WayIn> Stub();
  // How many brokers the list holds (a call tries each at most once).
  size_t BrokerCount();
  // The broker at `index` could not be reached: later calls go to the next one (unless another
  // call moved on already).
  void MoveOn(size_t index);
  void DescribeAsync(const std::string& topic, MarksCallback done, size_t attempts_left);
  void SetDeadline(grpc::ClientContext* ctx) const;
  // Re-describes, at their leaders, the partitions `first` (answered by `via`) does not lead.
  void DescribeAtLeaders(const std::string& topic, std::shared_ptr<LogStub> via,
                         const conduit::log::v1::DescribeTopicResponse& first, MarksCallback done);
  // A call to the configured broker that follows a not-leader answer to the leader once.
  grpc::Status CallFollowingLeader(
      const std::function<grpc::Status(LogStub& stub, grpc::ClientContext& ctx)>& call);

  const absl::Duration deadline_;
  absl::Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;             // the way in
  std::shared_ptr<LogStub> stub_ ABSL_GUARDED_BY(mu_);  // of addresses_[current_], made on use
  const std::shared_ptr<LeaderStubs> leaders_ = std::make_shared<LeaderStubs>();
  // Callback calls on their way (grpc_topic_source.cc); the destructor waits for them.
  const std::shared_ptr<CallsInFlight> calls_;
};

}  // namespace conduit::coordinator
